// Package gittest serves bare git repositories over HTTP for tests, with
// git's own `git http-backend` behind net/http/cgi: the smart HTTP
// protocol a real git server speaks, optionally behind basic auth.
package gittest

import (
	"crypto/subtle"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Server serves the bare repositories under its root.
type Server struct {
	URL  string // http://127.0.0.1:PORT
	root string
}

// Serve starts a server for the test; with user set, every request needs
// basic auth with user and password.
func Serve(t testing.TB, user, password string) *Server {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("gittest: git is not installed: %v", err)
	}
	root := t.TempDir()
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		backend.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, root: root}
}

// Repo makes bare repository name.git on the server whose branch main
// holds one commit per element of files (each commit writes its files),
// and returns its URL and the commits, oldest first.
func (s *Server) Repo(t testing.TB, name string, commits ...map[string]string) (string, []string) {
	t.Helper()
	work := t.TempDir()
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run(work, "init", "--quiet", "--initial-branch=main")
	var shas []string
	for _, files := range commits {
		for p, content := range files {
			full := filepath.Join(work, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		run(work, "add", "-A")
		run(work, "commit", "--quiet", "-m", "commit")
		shas = append(shas, run(work, "rev-parse", "HEAD"))
	}
	bare := filepath.Join(s.root, name+".git")
	run(s.root, "clone", "--quiet", "--bare", work, bare)
	return s.URL + "/" + name + ".git", shas
}

// Dir is the path on this machine of bare repository name.git.
func (s *Server) Dir(name string) string { return filepath.Join(s.root, name+".git") }
