package grpcserver

import (
	"net"
	"testing"
)

func TestLoopbackTarget(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:7070": "passthrough:///127.0.0.1:7070",
		"0.0.0.0:7070":   "passthrough:///127.0.0.1:7070",
		"[::]:7070":      "passthrough:///127.0.0.1:7070",
		"[::1]:7070":     "passthrough:///[::1]:7070",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopbackTarget(tcp); got != want {
			t.Errorf("loopbackTarget(%s) = %s, want %s", addr, got, want)
		}
	}
}
