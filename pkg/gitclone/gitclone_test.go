package gitclone_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/gitclone"
	"github.com/runwayhq/runway/pkg/gitclone/gittest"
)

// A revision (a commit, a branch, the default) is checked out at the
// commit it names, from git's own http-backend.
func TestCloneRevisions(t *testing.T) {
	srv := gittest.Serve(t, "", "")
	url, shas := srv.Repo(t, "data", map[string]string{"v.txt": "one\n"}, map[string]string{"v.txt": "two\n"})
	for _, tc := range []struct{ revision, sha, content string }{
		{"", shas[1], "two\n"}, {"main", shas[1], "two\n"}, {shas[0], shas[0], "one\n"}, {shas[0][:10], shas[0], "one\n"},
	} {
		dir := filepath.Join(t.TempDir(), "clone")
		got, err := gitclone.Clone(t.Context(), dir, url, tc.revision, nil)
		if err != nil {
			t.Fatalf("revision %q: %v", tc.revision, err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "v.txt"))
		if got != tc.sha || string(b) != tc.content {
			t.Errorf("revision %q: commit %s with %q, want %s with %q", tc.revision, got, b, tc.sha, tc.content)
		}
	}
	_, err := gitclone.Clone(t.Context(), filepath.Join(t.TempDir(), "c"), url, "no-such-branch", nil)
	if err == nil || !strings.Contains(err.Error(), `no branch, tag or commit "no-such-branch"`) {
		t.Errorf("a missing revision: %v", err)
	}
}

// A private repository needs the token; without it, or with a wrong one,
// the clone fails saying so and the error never holds the token. The node's
// own repositories are out of reach (file:// and local paths).
func TestClonePrivateAndTransports(t *testing.T) {
	const token = "tok-3f9a1c77"
	srv := gittest.Serve(t, "bot", token)
	url, shas := srv.Repo(t, "private", map[string]string{"secret.txt": "s\n"})
	got, err := gitclone.Clone(t.Context(), filepath.Join(t.TempDir(), "c"), url, "main", &gitclone.Auth{Username: "bot", Token: token})
	if err != nil || got != shas[0] {
		t.Fatalf("with the token: %s, %v", got, err)
	}
	for _, a := range []*gitclone.Auth{nil, {Username: "bot", Token: "wrong"}} {
		_, err := gitclone.Clone(t.Context(), filepath.Join(t.TempDir(), "c"), url, "main", a)
		if err == nil || strings.Contains(err.Error(), token) {
			t.Errorf("auth %v: %v", a, err)
		}
	}
	local := srv.Dir("private") // a repository of this machine's disk
	for _, repo := range []string{"file://" + local, local} {
		if _, err := gitclone.Clone(t.Context(), filepath.Join(t.TempDir(), "c"), repo, "", nil); err == nil || !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("%s: %v, want the transport refused", repo, err)
		}
	}
}
