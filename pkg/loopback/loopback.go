// Package loopback tells loopback addresses (127.0.0.0/8, ::1, localhost)
// from the rest, without resolving names: where plaintext is allowed.
package loopback

import "net"

// Host reports whether h is localhost or a loopback IP.
func Host(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Addr reports whether host:port's host is loopback; an empty or wildcard
// host is not.
func Addr(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	return err == nil && Host(h)
}
