//go:build linux

// Package hostile is Runway's hostile-tenant suite: each case is a real
// attempt, through real processes, that must fail, and checks that it failed
// for the right reason.
package hostile

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
)

// tlsBin is the runway binary, built once for the suite's TLS cases.
var tlsBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "runway-hostile-tls-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "runway")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/runwayhq/runway/cmd/runway").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build cmd/runway: %w\n%s", err, out)
	}
	return bin, nil
})

// tlsRunway is the runway binary, or the test fails.
func tlsRunway(t *testing.T) string {
	t.Helper()
	bin, err := tlsBin()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// tlsFreeAddr is a loopback address whose port was free a moment ago.
func tlsFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// tlsStart runs `runway args...` in its own process group until the test
// ends (SIGTERM, then SIGKILL to the group), logging its output on failure.
func tlsStart(t *testing.T, name string, args ...string) *syncBuffer {
	t.Helper()
	cmd := exec.Command(tlsRunway(t), args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("--- %s output:\n%s", name, out.String())
		}
	})
	return out
}

// tlsScraper scrapes an operations listener with the token, over plaintext
// (ca empty) or over TLS trusting ca with the client certificate, if any.
type tlsScraper struct {
	token string
	files tlstest.Files
}

// get is GET url's status and body, or the transport's error.
func (s tlsScraper) get(ctx context.Context, url string, clientCert bool) (int, string, error) {
	tc := &tls.Config{}
	if s.files.CA != "" {
		pool, err := grpcserver.LoadCAs(s.files.CA)
		if err != nil {
			return 0, "", err
		}
		tc.RootCAs = pool
	}
	if clientCert {
		cert, err := tls.LoadX509KeyPair(s.files.ClientCert, s.files.ClientKey)
		if err != nil {
			return 0, "", err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: tc}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String(), nil
}

// tlsEventually polls cond every 100 ms until it returns "" or timeout.
func tlsEventually(t *testing.T, timeout time.Duration, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
