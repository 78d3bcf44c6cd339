package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/toolproxy"
)

// toolListener is the tool proxy (pkg/toolproxy) on its own listener: an
// origin apart from the API's and the UI's.
type toolListener struct {
	ln   net.Listener
	srv  *http.Server
	conn *grpc.ClientConn // to the ToolService; nil when the caller owns it
	url  string           // its base URL, for the workload service's tool URLs
}

// proxyAddr is the proxy's listen address: addr, or by default the API
// listener's host on a free port.
func proxyAddr(addr, apiListen string) (string, error) {
	if addr != "" {
		return addr, nil
	}
	host, _, err := net.SplitHostPort(apiListen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", apiListen, err)
	}
	return net.JoinHostPort(host, "0"), nil
}

// listenTools opens the tool proxy's listener, the proxy asking the
// ToolService at apiAddr over loopback (each call with its caller's
// credential, none of its own).
func listenTools(addr, apiListen, apiAddr string, logger *slog.Logger) (*toolListener, error) {
	conn, err := grpc.NewClient("passthrough:///"+apiAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("tool proxy: connect to %s: %w", apiAddr, err)
	}
	t, err := openTools(addr, apiListen, conn, nil, logger)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	t.conn = conn
	return t, nil
}

// openTools opens the proxy's listener (over TLS with tc) in front of the
// ToolService on conn.
func openTools(addr, apiListen string, conn *grpc.ClientConn, tc *tls.Config, logger *slog.Logger) (*toolListener, error) {
	addr, err := proxyAddr(addr, apiListen)
	if err != nil {
		return nil, err
	}
	p, err := toolproxy.New(toolproxy.Config{Tools: workloadv1.NewToolServiceClient(conn), Secure: tc != nil, Logger: logger})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--proxy-listen: %w", err)
	}
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	return &toolListener{ln: ln, srv: p.Server(), url: toolproxy.URL(ln.Addr().String(), tc != nil)}, nil
}

// serve serves the proxy until ctx ends.
func (t *toolListener) serve(ctx context.Context) error {
	// Requests' contexts end with ctx: an upgraded connection (a
	// WebSocket), which Shutdown does not wait for, is closed with it.
	t.srv.BaseContext = func(net.Listener) context.Context { return ctx }
	done := make(chan error, 1)
	go func() { done <- t.srv.Serve(t.ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultShutdownTimeout)
		defer cancel()
		if err := t.srv.Shutdown(sctx); err != nil {
			_ = t.srv.Close() // upgraded connections (WebSockets) are not waited for
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return ctx.Err()
	}
}

// close releases the listener and the connection (a no-op once served).
func (t *toolListener) close() {
	_ = t.ln.Close()
	if t.conn != nil {
		_ = t.conn.Close()
	}
}
