package server_test

import (
	"os"
	"path/filepath"
	"testing"
)

// runway dev's data directory holds the admin's token, etcd and the
// history of every tenant's series: RunDev makes it, and the TSDB in it, its
// owner's alone, even when the directory was made before, readable by all.
func TestDevDataDirIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	startDev(t, dir, 0, 0)
	for _, d := range []string{dir, filepath.Join(dir, "tsdb")} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
}
