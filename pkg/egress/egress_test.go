package egress_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/runwayhq/runway/pkg/egress"
)

func TestPolicy_Check(t *testing.T) {
	for _, tc := range []struct {
		name, ip    string
		policy      egress.Policy
		wantRefused bool
	}{
		{"a public address is allowed", "93.184.216.34", egress.Policy{}, false},
		{"loopback is refused", "127.0.0.1", egress.Policy{}, true},
		{"loopback anywhere in 127/8 is refused", "127.45.0.9", egress.Policy{}, true},
		{"IPv6 loopback is refused", "::1", egress.Policy{}, true},
		{"loopback mapped into IPv6 is refused", "::ffff:127.0.0.1", egress.Policy{}, true},
		{"the unspecified address is refused (it reaches the host)", "0.0.0.0", egress.Policy{}, true},
		{"loopback is allowed when the administrator allows it", "127.0.0.1", egress.Policy{AllowLoopback: true}, false},
		{"a private address is refused", "10.1.2.3", egress.Policy{}, true},
		{"a private address is refused even with loopback allowed", "192.168.1.1", egress.Policy{AllowLoopback: true}, true},
		{"the metadata endpoint (link-local) is refused", "169.254.169.254", egress.Policy{}, true},
		{"IPv6 unique local is refused", "fd00::1", egress.Policy{}, true},
		{"IPv6 link-local is refused", "fe80::1", egress.Policy{}, true},
		{"carrier-grade NAT space is refused", "100.64.0.1", egress.Policy{}, true},
		{"a private address is allowed when private networks are", "10.1.2.3", egress.Policy{AllowPrivate: true}, false},
		{"multicast is always refused", "224.0.0.1", egress.Policy{AllowPrivate: true, AllowLoopback: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.policy.Check(netip.MustParseAddr(tc.ip))
			if got := errors.Is(err, egress.ErrRefused); got != tc.wantRefused {
				t.Fatalf("Check(%s) = %v, want refused=%v", tc.ip, err, tc.wantRefused)
			}
		})
	}
}

// names is a resolver of the test's choosing.
func names(m map[string][]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range m[host] {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

func TestPolicy_CheckHost_nameResolvingToPrivate(t *testing.T) {
	p := egress.Policy{AllowLoopback: true, Lookup: names(map[string][]string{
		"hooks.internal.example": {"93.184.216.34", "10.0.0.7"},
		"hooks.example":          {"93.184.216.34"},
	})}
	if err := p.CheckHost(t.Context(), "hooks.internal.example"); !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("a name with one private address: %v, want refused", err)
	}
	if err := p.CheckHost(t.Context(), "hooks.example"); err != nil {
		t.Fatalf("a public name: %v", err)
	}
}

// TestPolicy_Dial_rebinding: a name that resolved to a public address when
// it was checked and resolves to 127.0.0.1 when dialled is refused at the
// socket, though a server listens there; with loopback allowed the same
// dial connects.
func TestPolicy_Dial_rebinding(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var calls atomic.Int32
	rebinding := func(context.Context, string) ([]netip.Addr, error) {
		if calls.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	p := egress.Policy{Lookup: rebinding}
	if err := p.CheckHost(t.Context(), "rebind.example"); err != nil {
		t.Fatalf("first resolution (public): %v", err)
	}
	c, err := p.Dial(t.Context(), "tcp", net.JoinHostPort("rebind.example", port))
	if err == nil {
		c.Close()
		t.Fatal("the dial to the rebound loopback address connected")
	}
	if !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("dial: %v, want refused", err)
	}
	// An IP literal is checked the same way.
	if _, err := p.Dial(t.Context(), "tcp", srv.Listener.Addr().String()); !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("dial 127.0.0.1: %v, want refused", err)
	}
	allowed := egress.Policy{AllowLoopback: true, Lookup: rebinding}
	c, err = allowed.Dial(t.Context(), "tcp", net.JoinHostPort("rebind.example", port))
	if err != nil {
		t.Fatalf("dial with loopback allowed: %v", err)
	}
	c.Close()
}
