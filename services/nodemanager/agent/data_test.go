package agent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A data source's directory is made once per binding revision: the pod
// adopted or started again for the same binding keeps it (and what was
// written into it); a new binding makes it again from nothing; a failed
// fill leaves no record, so the next start tries again.
func TestDataMadeOncePerRevision(t *testing.T) {
	rec := t.TempDir()
	fills := 0
	mk := func(dir string) (string, error) {
		fills++
		return "abc123", os.MkdirAll(dir, 0o700)
	}
	dir, what, err := once(rec, 7, 0, mk)
	if err != nil || what != "abc123" || fills != 1 {
		t.Fatalf("first: %s %s %v (fills %d)", dir, what, err, fills)
	}
	if err := os.WriteFile(filepath.Join(dir, "written-by-the-pod"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, what, err := once(rec, 7, 0, mk); err != nil || what != "abc123" || fills != 1 {
		t.Errorf("same revision: %s %v (fills %d), want the first's, not made again", what, err, fills)
	}
	if _, err := os.Stat(filepath.Join(dir, "written-by-the-pod")); err != nil {
		t.Errorf("the same revision lost the pod's file: %v", err)
	}
	if _, _, err := once(rec, 8, 0, mk); err != nil || fills != 2 {
		t.Errorf("a new revision: %v (fills %d)", err, fills)
	}
	if _, err := os.Stat(filepath.Join(dir, "written-by-the-pod")); err == nil {
		t.Error("a new binding kept the old run's file")
	}
	if _, _, err := once(rec, 9, 0, func(string) (string, error) { return "", errors.New("clone failed") }); err == nil {
		t.Fatal("a failed fill succeeded")
	}
	if _, _, err := once(rec, 9, 0, mk); err != nil || fills != 3 {
		t.Errorf("after a failed fill: %v (fills %d), want it tried again", err, fills)
	}
}
