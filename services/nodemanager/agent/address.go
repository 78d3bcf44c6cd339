package agent

import (
	"fmt"
	"net"
	"os"
)

// advertised is the agent address the node registers: advertise (a host,
// or host:port) when set, else the listener's; a listener on every
// interface (0.0.0.0, [::]) is advertised by the host name, never as
// itself, which no other machine can dial. A missing port is the
// listener's.
func advertised(advertise, listening string) (string, error) {
	host, port, err := net.SplitHostPort(listening)
	if err != nil {
		return "", fmt.Errorf("agent address %q: %w", listening, err)
	}
	if advertise != "" {
		if h, p, err := net.SplitHostPort(advertise); err == nil {
			host, port = h, p
		} else {
			host = advertise
		}
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("agent address: the listener is on every interface and the host name is unknown (set the advertise address): %w", err)
		}
	}
	return net.JoinHostPort(host, port), nil
}
