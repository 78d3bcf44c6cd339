// Package netcut is a TCP proxy on 127.0.0.1 that a test can cut and
// restore: what a network partition between a client and its server looks
// like to both (connections reset, new ones refused), without stopping
// either.
package netcut

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proxy forwards connections from Addr to a target until Cut.
type Proxy struct {
	// Addr is where clients connect, "127.0.0.1:port"; it stays the same
	// across Cut and Restore.
	Addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
	wg    sync.WaitGroup
}

// New listens on a free 127.0.0.1 port and forwards to target: host:port,
// or unix://PATH for a unix socket (as runway dev's etcd listens).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netcut: %w", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target}
	p.serve(ln)
	return p, nil
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			network, addr := "tcp", p.target
			if path, ok := strings.CutPrefix(p.target, "unix://"); ok {
				network, addr = "unix", path
			}
			up, err := net.Dial(network, addr)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(up, c); up.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

// Cut closes the listener and every open connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore listens on Addr again (retrying while the port is released).
func (p *Proxy) Restore() error {
	var err error
	for range 100 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.Addr); err == nil {
			p.serve(ln)
			return nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("netcut: restore %s: %w", p.Addr, err)
}

// Close cuts the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.Cut()
	p.wg.Wait()
}
