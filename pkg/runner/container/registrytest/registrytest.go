// Package registrytest runs a real OCI registry for tests: the CNCF
// Distribution registry (github.com/distribution/distribution/v3,
// Apache-2.0), built from the Go module proxy as bin/registry by
// make/testbin.mk, serving a directory in plain HTTP on 127.0.0.1 with
// htpasswd (basic) authentication of one user. Podman reaches it as an
// insecure registry (podmantest trusts 127.0.0.1, as dockerd trusts
// 127.0.0.0/8).
package registrytest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Registry is a running registry and its one user.
type Registry struct {
	// Addr is its host:port on 127.0.0.1: the server of a registry
	// credential, and the first component of its images' references.
	Addr string
	// Username and Password are the user every request must authenticate
	// as, pulls included.
	Username, Password string
	log                *lockedLog
}

// lockedLog is the registry's output, read while it is written.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start runs bin/registry until t's cleanup; its user is username with
// password.
func Start(t testing.TB, username, password string) *Registry {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "bin", "registry")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (make bin/registry builds it)", bin, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd, config := filepath.Join(dir, "htpasswd"), filepath.Join(dir, "config.yml")
	if err := os.WriteFile(htpasswd, fmt.Appendf(nil, "%s:%s\n", username, hash), 0o600); err != nil {
		t.Fatal(err)
	}
	// The debug server and the upload purger are off: one port, nothing
	// running behind the test's back.
	conf := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: %s
auth:
  htpasswd:
    realm: runway-test
    path: %s
`, filepath.Join(dir, "data"), addr, htpasswd)
	if err := os.WriteFile(config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &Registry{Addr: addr, Username: username, Password: password, log: &lockedLog{}}
	cmd := exec.Command(bin, "serve", config)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	// Its environment is its own: REGISTRY_* variables would override the
	// file. No traces exported (it would post them to localhost:4318).
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "OTEL_TRACES_EXPORTER=none"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("registry:\n%s", r.log.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized { // up, and asking for the user
				return r
			}
			t.Fatalf("registry at %s answers /v2/ without credentials with %s; want 401", addr, resp.Status)
		}
		select {
		case <-exited:
			t.Fatalf("registry exited:\n%s", r.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry at %s did not answer in 30 s: %v\n%s", addr, err, r.log.String())
		}
	}
}

// Log is what the registry wrote so far (it logs requests, never their
// passwords: a test may search it).
func (r *Registry) Log() string { return r.log.String() }
