package local_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/procstat"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/local"
)

// A shim its runner left as it started the pod (the run recorded, no
// leader yet) is waited for: one that records its leader a moment later
// is a live run, adopted, not killed and started twice; one still
// starting after the wait is ended and its pod started again.
func TestNew_waitsForAShimStillStarting(t *testing.T) {
	dir := t.TempDir()
	// Stand-ins for the shims and the leader: processes of sessions of
	// their own, recorded as a shim records them.
	proc := func() (int, uint64) {
		t.Helper()
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		st, _ := procstat.Read(strconv.Itoa(cmd.Process.Pid))
		return cmd.Process.Pid, st.Start
	}
	record := func(id string, rec map[string]any) {
		t.Helper()
		b, err := json.Marshal(rec)
		if err == nil {
			err = os.MkdirAll(filepath.Join(dir, id), 0o700)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, id, local.RunName), b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	run := func(pod, shim int, shimStart uint64) map[string]any {
		return map[string]any{"revision": 5, "shim": shim, "shim_start": shimStart, "project": "team-a", "workload": "w", "pod": pod}
	}
	slowShim, slowStart := proc()
	stuckShim, stuckStart := proc()
	leader, leaderStart := proc()
	record("u.0", run(0, slowShim, slowStart))
	record("u.1", run(1, stuckShim, stuckStart))
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		time.Sleep(300 * time.Millisecond)
		rec := run(0, slowShim, slowStart)
		rec["leader"], rec["leader_start"] = leader, leaderStart
		record("u.0", rec)
	}()
	r, err := local.New(local.Config{DataDir: dir, Cgroup: "none"})
	<-recorded
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if !alive(slowShim) || !alive(leader) {
		t.Fatalf("the shim that recorded its leader (alive %v) or its leader (alive %v) was killed", alive(slowShim), alive(leader))
	}
	if alive(stuckShim) {
		t.Error("the shim that never recorded a leader outlived the wait")
	}
	spec := func(id string) local.Spec {
		pod, _ := strconv.Atoi(id[len("u."):])
		return local.Spec{ID: id, Revision: 5, Project: "team-a", Workload: "projects/team-a/workloads/w", Pod: pod,
			Command: []string{"sleep", "600"}}
	}
	p, err := r.Start(spec("u.0"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Origin() != runner.Adopted || p.Pid() != leader {
		t.Errorf("u.0: origin %v, pid %d; want adopted, the recorded leader %d", p.Origin(), p.Pid(), leader)
	}
	q, err := r.Start(spec("u.1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Kill() })
	if q.Origin() != runner.Restarted {
		t.Errorf("u.1: origin %v, want restarted", q.Origin())
	}
	_ = syscall.Kill(slowShim, syscall.SIGKILL) // its end, as a shim ends once its leader has
	waitDone(t, p)
}
