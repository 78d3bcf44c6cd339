package local

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A shim whose runner died once it recorded the run (its parent is not
// the runner that sent the spec) starts nothing and leaves the record
// with no leader: the next runner starts the pod again, once, saying so.
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
	var left runRecord
	if !readJSON(filepath.Join(rec, RunName), &left) || left.Leader != 0 || left.Shim <= 1 {
		t.Errorf("the run record %+v: want the shim's, with no leader", left)
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

// shimRunnerEnv makes the test binary a runner that starts one shim (the
// spec as JSON) and waits to be killed.
const shimRunnerEnv = "RUNWAY_TEST_SHIM_RUNNER"

func init() {
	if b := os.Getenv(shimRunnerEnv); b != "" {
		var s shimSpec
		if err := json.Unmarshal([]byte(b), &s); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		s.Parent = os.Getpid()
		_, _, err := startShim(s, os.Stdout, nil)
		fmt.Println(err)
		os.Exit(1)
	}
}

// A shim dies with its runner until it has recorded the run: a runner
// killed while its shim was still writing the record (here blocked on a
// FIFO in its place) leaves no shim that could record the run, or run the
// pod, after the next runner has looked.
func TestShim_diesWithItsRunnerUntilRecorded(t *testing.T) {
	rec, work := t.TempDir(), t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(rec, RunName+".tmp"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(work, "ran")
	b, err := json.Marshal(shimSpec{Path: "/bin/sh", Args: []string{"sh", "-c", "touch " + marker}, Dir: work, RecordDir: rec})
	if err != nil {
		t.Fatal(err)
	}
	runner := exec.Command("/proc/self/exe")
	runner.Env = append(os.Environ(), shimRunnerEnv+"="+string(b))
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = runner.Process.Kill(); _ = runner.Wait() }()
	shim := 0
	for deadline := time.Now().Add(10 * time.Second); shim == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no shim blocked writing its record in 10 s")
		}
		shim = shimOf(rec)
	}
	_ = runner.Process.Kill()
	_ = runner.Wait()
	for deadline := time.Now().Add(10 * time.Second); alive(shim, 0) || processExists(shim); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			// Unblocked, it would record the run after its runner died.
			f, _ := os.OpenFile(filepath.Join(rec, RunName+".tmp"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if f != nil {
				_ = f.Close()
			}
			t.Fatalf("the shim (pid %d) outlived its runner before it recorded the run", shim)
		}
	}
	if _, err := os.Stat(filepath.Join(rec, RunName)); !os.IsNotExist(err) {
		t.Errorf("a run record (%v)", err)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("the command ran (%v)", err)
	}
}

// shimOf is the pid of the shim of record directory rec blocked in its
// first write (0: none yet).
func shimOf(rec string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if !bytes.Equal(cmdline, []byte("runway-pod-shim\x00"+filepath.Base(rec)+"\x00")) {
			continue
		}
		if wchan, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "wchan")); bytes.Contains(wchan, []byte("fifo")) || bytes.Contains(wchan, []byte("partner")) {
			return pid
		}
	}
	return 0
}

// processExists reports whether pid is a process that has not been reaped
// and is not a zombie.
func processExists(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !bytes.Contains(st, []byte(") Z "))
}
