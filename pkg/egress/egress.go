package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// Policy is what an administrator allows beyond public addresses.
type Policy struct {
	// AllowLoopback allows 127.0.0.0/8, ::1 and the unspecified addresses
	// (`runway dev`, tests).
	AllowLoopback bool
	// AllowPrivate allows private (10/8, 172.16/12, 192.168/16, fc00::/7,
	// 100.64/10) and link-local addresses (169.254/16, fe80::/10).
	AllowPrivate bool
	// Lookup resolves a host name; net.DefaultResolver's when nil (tests
	// give names addresses of their choosing).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Timeout bounds one connection attempt; 10 s when 0.
	Timeout time.Duration
}

// ErrRefused is wrapped by every refusal of an address.
var ErrRefused = errors.New("address refused")

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Check says whether ip may be connected to.
func (p Policy) Check(ip netip.Addr) error {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return fmt.Errorf("%w: not an IP address", ErrRefused)
	case ip.IsLoopback() || ip.IsUnspecified():
		if !p.AllowLoopback {
			return fmt.Errorf("%w: %s is a loopback address (the server's own); an administrator may allow it", ErrRefused, ip)
		}
	case ip.IsPrivate() || cgnat.Contains(ip) || ip.IsLinkLocalUnicast():
		if !p.AllowPrivate {
			return fmt.Errorf("%w: %s is a private or link-local address; an administrator may allow private networks", ErrRefused, ip)
		}
	case ip.IsMulticast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast():
		return fmt.Errorf("%w: %s is a multicast address", ErrRefused, ip)
	}
	return nil
}

// resolve is host's addresses (host itself when it is an IP address).
func (p Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	lookup := p.Lookup
	if lookup == nil {
		lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: no addresses", host)
	}
	return addrs, nil
}

// CheckHost resolves host and checks every address it has.
func (p Policy) CheckHost(ctx context.Context, host string) error {
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if err := p.Check(a); err != nil {
			return fmt.Errorf("%s: %w", host, err)
		}
	}
	return nil
}

// control refuses, at the socket, an address the policy does not allow:
// whatever resolved it, this is the address dialled.
func (p Policy) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRefused, address, err)
	}
	return p.Check(ap.Addr())
}

// Dial connects to addr ("host:port") over TCP: the host is resolved now
// and each address is checked as it is dialled. Its signature is
// http.Transport.DialContext's.
func (p Policy) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := p.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: timeout, Control: p.control}
	var errs []error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("connect to %s: %w", addr, errors.Join(errs...))
}
