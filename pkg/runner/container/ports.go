package container

import (
	"net"
	"net/netip"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"

	"github.com/runwayhq/runway/pkg/runner"
)

// publishHost is the only address a pod's ports are published on: the
// node's loopback, where the tool proxy on the node dials them. Nothing of
// a pod is open on the node's other addresses, to other tenants' pods
// (their bridges reach no host address: network.go) or to the network.
var publishHost = netip.MustParseAddr("127.0.0.1")

// publish publishes spec's ports on the loopback, each on a port the engine
// picks (no pod can take another's).
func publish(spec runner.Spec, cfg *container.Config, host *container.HostConfig) {
	if len(spec.Ports) == 0 {
		return
	}
	cfg.ExposedPorts = network.PortSet{}
	host.PortBindings = network.PortMap{}
	for _, p := range spec.Ports {
		port, ok := network.PortFrom(uint16(p), network.TCP)
		if !ok {
			continue
		}
		cfg.ExposedPorts[port] = struct{}{}
		host.PortBindings[port] = []network.PortBinding{{HostIP: publishHost, HostPort: ""}}
	}
}

// published is where the engine published the container's ports: each
// container port's loopback address.
func published(c container.InspectResponse) map[int]string {
	if c.NetworkSettings == nil {
		return nil
	}
	out := map[int]string{}
	for port, bs := range c.NetworkSettings.Ports {
		for _, b := range bs {
			if b.HostIP == publishHost && b.HostPort != "" {
				out[int(port.Num())] = net.JoinHostPort(publishHost.String(), b.HostPort)
			}
		}
	}
	return out
}

// Addresses is where the pod's ports are reached on the node.
func (p *pod) Addresses() map[int]string { return p.ports }

var _ runner.Published = (*pod)(nil)
