package history_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/runwayhq/runway/pkg/history"
)

// The TSDB holds every tenant's series: its directory is its owner's alone,
// both when Open makes it and when it was there before, readable by all.
func TestOpenMakesTheDirectoryPrivate(t *testing.T) {
	parent := t.TempDir()
	before := filepath.Join(parent, "before")
	if err := os.Mkdir(before, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{before, filepath.Join(parent, "fresh", "tsdb")} {
		s := open(t, history.Config{Dir: dir})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, want 0700", dir, fi.Mode().Perm())
		}
	}
}
