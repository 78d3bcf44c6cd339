package local

import (
	"os"
	"path/filepath"
	"testing"
)

// A shim whose runner died (its parent is not the runner that sent the
// spec) starts nothing and leaves no run record: the next runner, which
// may already have looked for records, starts the pod itself, once.
func TestShim_orphanedBeforeStartRunsNothing(t *testing.T) {
	rec, work := t.TempDir(), t.TempDir()
	log, err := os.Create(filepath.Join(rec, LogName))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	marker := filepath.Join(work, "ran")
	s := shimSpec{Path: "/bin/sh", Args: []string{"sh", "-c", "touch " + marker}, Dir: work, RecordDir: rec,
		Parent: os.Getpid() + 1_000_000} // not this process: as if the runner had died
	if _, _, err := startShim(s, log, nil); err == nil {
		t.Fatal("the shim of a dead runner answered as if it started the pod")
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the command ran (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(rec, RunName)); !os.IsNotExist(err) {
		t.Errorf("the run record is left (%v)", err)
	}
	s.Parent = os.Getpid()
	cmd, run, err := startShim(s, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	var ex exitRecord
	if !readJSON(filepath.Join(rec, ExitName), &ex) || ex.Code != 0 || run.Leader <= 1 {
		t.Errorf("with its runner alive: exit %+v, run %+v; want the command run", ex, run)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the command did not run: %v", err)
	}
}
