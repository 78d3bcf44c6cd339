package metrics_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
	"github.com/runwayhq/runway/pkg/metrics"
)

var plainHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := plainHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func serve(t *testing.T, cfg metrics.OpsConfig) string {
	t.Helper()
	ops, err := metrics.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ops.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return "http://" + ops.Addr() + "/metrics"
}

// A registry serves the Go, process and gRPC families, and promlint finds
// nothing in them.
func TestRegistryServesAndLints(t *testing.T) {
	reg, err := metrics.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, metrics.OpsConfig{Listen: "127.0.0.1:0", Gatherer: reg})
	code, body := get(t, url, "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, f := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(body, "# TYPE "+f+" ") {
			t.Errorf("no %s in\n%s", f, body)
		}
	}
	problems, err := metrics.LintText(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Errorf("promlint: %v", problems)
	}
}

// Lint catches what promtool would: a counter without _total.
func TestLintFindsBadNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "runway_things", Help: "Things."})
	reg.MustRegister(c)
	c.Inc()
	problems, err := metrics.Lint(reg)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Metric != "runway_things" {
		t.Errorf("problems %v, want one about runway_things", problems)
	}
}

// With a token, a request without it (or with another) is refused.
func TestOpsToken(t *testing.T) {
	reg, err := metrics.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	url := serve(t, metrics.OpsConfig{Listen: "127.0.0.1:0", Gatherer: reg, Token: "s3cret"})
	for _, tc := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {"other", http.StatusUnauthorized}, {"s3cret", http.StatusOK}} {
		if code, _ := get(t, url, tc.token); code != tc.want {
			t.Errorf("token %q: %d, want %d", tc.token, code, tc.want)
		}
	}
}

// An address that is not loopback is refused without a token.
func TestOpsNonLoopbackNeedsToken(t *testing.T) {
	reg, err := metrics.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		if _, err := metrics.Listen(metrics.OpsConfig{Listen: addr, Gatherer: reg}); err == nil ||
			!strings.Contains(err.Error(), "--metrics-token-file") {
			t.Errorf("Listen(%s) without a token: %v, want a refusal naming --metrics-token-file", addr, err)
		}
	}
}

// With TLS the listener answers HTTPS only: a plaintext request, token and
// all, gets no series; with the client CA, a scraper without a certificate
// is refused at the handshake.
func TestOpsTLS(t *testing.T) {
	files := tlstest.New(t)
	reg, err := metrics.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := grpcserver.LoadTLS(files.Cert, files.Key, files.CA)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := metrics.Listen(metrics.OpsConfig{Listen: "127.0.0.1:0", Gatherer: reg, Token: "s3cret", TLS: tc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ops.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	if !strings.HasPrefix(ops.URL(), "https://") {
		t.Errorf("URL %s, want https://", ops.URL())
	}
	if code, body := get(t, "http://"+ops.Addr()+"/metrics", "s3cret"); code == http.StatusOK || strings.Contains(body, "go_goroutines") {
		t.Errorf("plaintext GET /metrics: %d, served the series", code)
	}
	pool, err := grpcserver.LoadCAs(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(certs []tls.Certificate) (*http.Response, error) {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ops.URL()+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		return c.Do(req)
	}
	if resp, err := scrape(nil); err == nil {
		resp.Body.Close()
		t.Errorf("HTTPS without a client certificate: %d, want a refused handshake", resp.StatusCode)
	}
	cert, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := scrape([]tls.Certificate{cert})
	if err != nil {
		t.Fatalf("HTTPS with a client certificate: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "go_goroutines") {
		t.Errorf("HTTPS with a client certificate: %d\n%.300s", resp.StatusCode, b)
	}
}
