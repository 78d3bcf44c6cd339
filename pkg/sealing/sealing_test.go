package sealing_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/sealing"
)

func newFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	created, err := sealing.Create(path)
	if err != nil || !created {
		t.Fatalf("Create: %v, %v", created, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", st.Mode(), err)
	}
	return path
}

// A value sealed before a rotation opens after it, new values go under the
// new key, and once the old key is pruned only what is under the new one
// opens. The ring follows the file without being loaded again.
func TestRotation(t *testing.T) {
	path := newFile(t)
	ring, err := sealing.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	plain, ad := []byte("the value"), []byte("projects/a/credentials/c")
	oldID, oldNonce, oldSealed, err := ring.Seal(plain, ad)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(oldSealed, plain) {
		t.Fatal("sealed value holds the plain text")
	}
	newID, err := sealing.AddKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if newID == oldID {
		t.Fatalf("new key id %q is the old one", newID)
	}
	if got, err := ring.Newest(); err != nil || got != newID {
		t.Fatalf("Newest after AddKey: %q, %v; want %q", got, err, newID)
	}
	id, nonce, sealed, err := ring.Seal(plain, ad)
	if err != nil || id != newID {
		t.Fatalf("Seal after AddKey: key %q, %v; want %q", id, err, newID)
	}
	for _, s := range []struct {
		id           string
		nonce, value []byte
	}{{oldID, oldNonce, oldSealed}, {id, nonce, sealed}} {
		if got, err := ring.Open(s.id, s.nonce, s.value, ad); err != nil || !bytes.Equal(got, plain) {
			t.Errorf("Open under %s: %q, %v", s.id, got, err)
		}
	}
	// Other additional data (a value copied to another credential) does not open.
	if _, err := ring.Open(id, nonce, sealed, []byte("projects/b/credentials/c")); err == nil {
		t.Error("a value opened under another name")
	}
	removed, err := sealing.PruneKeys(path)
	if err != nil || len(removed) != 1 || removed[0] != oldID {
		t.Fatalf("PruneKeys: %v, %v; want [%s]", removed, err, oldID)
	}
	if _, err := ring.Open(oldID, oldNonce, oldSealed, ad); !errors.Is(err, sealing.ErrUnknownKey) {
		t.Errorf("Open under a pruned key: %v, want ErrUnknownKey", err)
	}
	if got, err := ring.Open(id, nonce, sealed, ad); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("Open under the kept key: %q, %v", got, err)
	}
}

// A key file others may read, or one that is not keys, is refused.
func TestLoadRefuses(t *testing.T) {
	path := newFile(t)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sealing.Load(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("Load of a 0644 file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	for _, body := range []string{"", "k1 notbase64\n", "k1 c2hvcnQ=\n", "# only a comment\n",
		"k1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nk1 AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"} {
		if err := os.WriteFile(bad, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := sealing.Load(bad); err == nil {
			t.Errorf("Load of %q: no error", body)
		}
	}
}
