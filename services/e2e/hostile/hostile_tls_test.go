//go:build linux

package hostile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
)

// TestHostileTLSOperationsListener: a service (runway serve), the gateway
// and a node agent, each with --tls-cert-file, --tls-key-file and
// --tls-client-ca-file and an operations listener (--metrics-listen) with its
// token. An attacker on the network who has the token (it is in every
// scraper's config) but no client certificate tries plaintext HTTP: no
// series; HTTPS without a certificate: refused at the handshake. The
// scraper with the CA's client certificate gets the series over HTTPS.
func TestHostileTLSOperationsListener(t *testing.T) {
	files := tlstest.New(t)
	etcd := etcdtest.New(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("ops-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"--tls-cert-file", files.Cert, "--tls-key-file", files.Key, "--tls-client-ca-file", files.CA}
	type listener struct {
		name string
		args []string
		ops  string
	}
	var ls []listener
	quota := tlsFreeAddr(t)
	for _, l := range []listener{
		{name: "serve quota", args: []string{"serve", "quota", "--etcd-endpoints", etcd.Endpoint, "--listen", quota}},
		{name: "gateway", args: []string{"gateway", "--quota-server", quota, "--tls-ca-file", files.CA, "--listen", tlsFreeAddr(t)}},
		{name: "agent", args: []string{"agent", "--node", "hostile-1", "--etcd-endpoints", etcd.Endpoint, "--gpu-backend", "simulated",
			"--gpus", "1", "--runtime", "process", "--data-dir", filepath.Join(dir, "agent"), "--work-dir", filepath.Join(dir, "pods"), "--listen", tlsFreeAddr(t)}},
	} {
		l.ops = tlsFreeAddr(t)
		args := append(l.args, "--metrics-listen", l.ops, "--metrics-token-file", tokenFile)
		tlsStart(t, l.name, append(args, tlsArgs...)...)
		ls = append(ls, l)
	}
	good := tlsScraper{token: "ops-token", files: files}
	for _, l := range ls {
		tlsEventually(t, 30*time.Second, l.name+"'s operations listener over mutual TLS", func() string {
			code, body, err := good.get(t.Context(), "https://"+l.ops+"/metrics", true)
			if err != nil {
				return err.Error()
			}
			if code != 200 || !strings.Contains(body, "go_goroutines") {
				return "status " + body[:min(len(body), 200)]
			}
			return ""
		})
		// Plaintext with the token: Go's TLS server answers a plaintext
		// request with 400 and no series.
		code, body, err := tlsScraper{token: "ops-token"}.get(t.Context(), "http://"+l.ops+"/metrics", false)
		if err == nil && (code == 200 || strings.Contains(body, "go_goroutines")) {
			t.Errorf("%s: plaintext GET /metrics with the token answered %d with the series", l.name, code)
		} else if err == nil && !strings.Contains(body, "HTTPS") {
			t.Errorf("%s: plaintext GET /metrics: %d %q, want the TLS server's refusal", l.name, code, body)
		}
		// HTTPS, the token, but no client certificate.
		if code, _, err := good.get(t.Context(), "https://"+l.ops+"/metrics", false); err == nil {
			t.Errorf("%s: HTTPS without a client certificate answered %d, want a refused handshake", l.name, code)
		} else if !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: HTTPS without a client certificate: %v, want a certificate error", l.name, err)
		}
	}
}
