package grpcserver

import (
	"net/netip"
	"testing"
)

// X-Forwarded-For is believed hop by hop from the right only while the hop
// it came from is a trusted proxy.
func TestThroughProxies(t *testing.T) {
	s := &Server{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	for _, c := range []struct{ addr, fwd, want string }{
		{"10.1.1.1:5000", "203.0.113.9", "203.0.113.9"},
		{"10.1.1.1:5000", "198.51.100.1, 203.0.113.9, 10.2.2.2", "203.0.113.9"},
		{"203.0.113.9:7000", "1.2.3.4", "203.0.113.9:7000"}, // not from a proxy: the header is the client's own
		{"127.0.0.1:7000", "1.2.3.4", "127.0.0.1:7000"},     // loopback is not trusted by default
		{"10.1.1.1:5000", "", "10.1.1.1:5000"},
		{"10.1.1.1:5000", "10.3.3.3", "10.3.3.3"},
	} {
		if got := s.throughProxies(c.addr, c.fwd); got != c.want {
			t.Errorf("from %s with X-Forwarded-For %q: %s, want %s", c.addr, c.fwd, got, c.want)
		}
	}
}
