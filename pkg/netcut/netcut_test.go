package netcut_test

import (
	"bufio"
	"net"
	"testing"

	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/netcut"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Echo through the proxy; cut: the open connection ends and new ones are
// refused; restored: the same address echoes again.
func TestProxy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				s := bufio.NewScanner(c)
				for s.Scan() {
					_, _ = c.Write([]byte(s.Text() + "\n"))
				}
			}()
		}
	}()
	p, err := netcut.New(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	echo := func() (net.Conn, error) {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			return nil, err
		}
		if _, err := c.Write([]byte("hi\n")); err != nil {
			return nil, err
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || line != "hi\n" {
			c.Close()
			return nil, err
		}
		return c, nil
	}
	c, err := echo()
	if err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("an open connection survived the cut")
	}
	c.Close()
	if c, err := net.Dial("tcp", p.Addr); err == nil {
		c.Close()
		t.Error("a new connection was accepted while cut")
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	c, err = echo()
	if err != nil {
		t.Fatalf("after restore: %v", err)
	}
	c.Close()
}
