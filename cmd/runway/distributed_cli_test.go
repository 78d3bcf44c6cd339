package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// gangState is what the restart test reads of a workload.
type gangState struct {
	Status struct {
		Phase              string
		RunningPods        int
		AllocatedMilliGpus string
		GangRestarts       int
		PreemptionCount    int
		Events             []struct{ Type, Message string }
	}
}

func describeGang(t *testing.T, d *devServer, name string) gangState {
	t.Helper()
	var w gangState
	if err := json.Unmarshal([]byte(d.ok(t, "workload", "describe", name, "-p", "team-a", "-o", "json")), &w); err != nil {
		t.Fatal(err)
	}
	return w
}

// waitGang polls the workload until ok holds (60 s at most).
func waitGang(t *testing.T, d *devServer, name, what string, ok func(gangState) bool) gangState {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		w := describeGang(t, d, name)
		if ok(w) {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: timed out; status %+v", name, what, w.Status)
		}
	}
}

// A distributed training whose worker 2 fails while the master and worker
// 1 run (process runtime, through runway dev): with --restart-policy never
// the workload fails at once and its other pods are stopped, holding
// nothing; with on-failure and --backoff-limit 1 the whole gang is stopped
// and started again once, then fails the same way. Never half a gang
// holding GPUs: the project's allocation goes back to zero, and a 4-GPU
// training submitted after each takes the whole cluster.
func TestCLI_DistributedRestartPolicy(t *testing.T) {
	d := startDev(t)
	d.ok(t, "project", "create", "team-a", "--gpu", "4")
	// Worker 2 fails after the others have started; they would run 10 min.
	cmd := []string{"--", "sh", "-c", `echo rank $RANK of $WORLD_SIZE at $MASTER_ADDR:$MASTER_PORT; if [ "$RANK" = 2 ]; then sleep 2; exit 3; fi; exec sleep 600`}
	submit := func(name string, flags ...string) {
		d.ok(t, append(append([]string{"training", "submit", name, "-p", "team-a", "-i", "busybox", "-g", "1", "--cpu", "0.1", "--memory", "100M",
			"--framework", "pytorch", "--workers", "2"}, flags...), cmd...)...)
	}
	failedHoldingNothing := func(w gangState) bool {
		return w.Status.Phase == "WORKLOAD_PHASE_FAILED" && w.Status.RunningPods == 0 && (w.Status.AllocatedMilliGpus == "" || w.Status.AllocatedMilliGpus == "0") // protojson omits a zero
	}
	fillCluster := func(name string) {
		t.Helper()
		d.ok(t, "training", "submit", name, "-p", "team-a", "-i", "busybox", "-g", "2", "--workers", "2", "--", "sleep", "600")
		waitGang(t, d, name, "running on every GPU", func(w gangState) bool { return w.Status.Phase == "WORKLOAD_PHASE_RUNNING" })
		d.ok(t, "workload", "delete", name, "-p", "team-a")
	}

	submit("never", "--restart-policy", "never")
	w := waitGang(t, d, "never", "failed", failedHoldingNothing)
	wantEvent(t, w, "WORKLOAD_EVENT_TYPE_FINISHED", "Pod 2 failed (exit code 3)", "; the other pods are stopped.")
	if w.Status.GangRestarts != 0 {
		t.Errorf("never: %d gang restarts, want 0", w.Status.GangRestarts)
	}
	if out := d.ok(t, "workload", "logs", "never", "-p", "team-a", "--pod", "1"); !strings.Contains(out, "rank 1 of 3 at 127.0.0.1:") {
		t.Errorf("pod 1's log %q, want its rank and the master's loopback address", out)
	}
	fillCluster("fill-1")

	submit("again", "--restart-policy", "on-failure", "--backoff-limit", "1")
	w = waitGang(t, d, "again", "failed after one restart", failedHoldingNothing)
	if w.Status.GangRestarts != 1 || w.Status.PreemptionCount != 0 {
		t.Errorf("on-failure: %d gang restarts and %d preemptions, want 1 and 0", w.Status.GangRestarts, w.Status.PreemptionCount)
	}
	wantEvent(t, w, "WORKLOAD_EVENT_TYPE_GANG_RESTARTED", "Pod 2 failed (exit code 3)", "; every pod is stopped and the gang started again (restart 1 of 1).")
	wantEvent(t, w, "WORKLOAD_EVENT_TYPE_FINISHED", "Pod 2 failed (exit code 3)", "the backoff limit of 1 restarts is reached; the other pods are stopped.")
	scheduled := 0
	for _, e := range w.Status.Events {
		if e.Type == "WORKLOAD_EVENT_TYPE_SCHEDULED" {
			scheduled++
		}
	}
	if scheduled < 2 {
		t.Errorf("on-failure: scheduled %d times, want the gang placed again after its restart", scheduled)
	}
	fillCluster("fill-2")
}

// wantEvent: an event of type typ whose message holds every part.
func wantEvent(t *testing.T, w gangState, typ string, parts ...string) {
	t.Helper()
	for _, e := range w.Status.Events {
		if e.Type == typ && !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(e.Message, p) }) {
			return
		}
	}
	t.Errorf("no %s event saying %q in %+v", typ, parts, w.Status.Events)
}
