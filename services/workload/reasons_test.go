package workload_test

import (
	"testing"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/workload"
)

// TestController_PendingReasons: the scheduler's reasons record folds into
// status.pending_reasons, is not written again while unchanged, and the
// reasons are cleared when the workload runs (the scheduler deletes the
// record in the transaction that binds it).
func TestController_PendingReasons(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := e.create(t, "team-a", "train", training())
	e.runController(t)

	const msg = "needs 4 GPUs on one node; the largest free block is 2 GPUs"
	rec := &workloadv1.WorkloadStatus{PendingReasons: []*workloadv1.PendingReason{{Message: msg}}}
	if _, err := etcdstore.NewBatch(e.etcd.Client).Put(etcdstore.PrefixReasons+"team-a/train", rec).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := e.await(t, w.GetName(), "reasons folded", func(w *workloadv1.Workload) bool {
		rs := w.GetStatus().GetPendingReasons()
		return len(rs) == 1 && rs[0].GetMessage() == msg
	})
	if p := got.GetStatus().GetPhase(); p != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING {
		t.Errorf("phase %v, want PENDING", p)
	}
	e.stable(t, got)

	ps := &workloadv1.PodStatus{Index: 0, Node: "nodes/n1", FractionMilli: 1000, DeviceIndexes: []int32{0},
		State: workloadv1.PodState_POD_STATE_BOUND}
	if _, err := etcdstore.NewBatch(e.etcd.Client).Delete(etcdstore.PrefixReasons+"team-a/train").
		Put(bindingKey("n1", "team-a", "train", 0), ps).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Bound, not yet started: the scheduler's reasons give way to STARTING.
	got = e.await(t, w.GetName(), "bound", func(w *workloadv1.Workload) bool { return w.GetStatus().GetRunningPods() == 1 })
	if rs := got.GetStatus().GetPendingReasons(); got.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING ||
		len(rs) != 1 || rs[0].GetCheck() != workloadv1.PendingCheck_PENDING_CHECK_STARTING {
		t.Errorf("bound, not started: phase %v, reasons %v; want PENDING with STARTING only", got.GetStatus().GetPhase(), rs)
	}
	e.report(t, "n1", "team-a", "train", 0, workloadv1.PodState_POD_STATE_RUNNING, 0)
	got = e.await(t, w.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	if rs := got.GetStatus().GetPendingReasons(); len(rs) != 0 {
		t.Errorf("pending reasons of a running workload: %v", rs)
	}
	e.stable(t, got)
}

// TestFoldReasons: the scheduler's reasons replace a PENDING workload's,
// and are ignored in any other phase or when empty.
func TestFoldReasons(t *testing.T) {
	rs := []*workloadv1.PendingReason{{Message: "needs 4 GPUs on one node; the largest free block is 2 GPUs"}}
	for _, tc := range []struct {
		phase workloadv1.WorkloadPhase
		in    []*workloadv1.PendingReason
		want  string
	}{
		{workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING, rs, rs[0].GetMessage()},
		{workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING, nil, "before"},
		{workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING, rs, ""},
		{workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED, rs, ""},
		{workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED, rs, ""},
	} {
		w := &workloadv1.Workload{Status: &workloadv1.WorkloadStatus{Phase: tc.phase}}
		if tc.phase == workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING {
			w.Status.PendingReasons = []*workloadv1.PendingReason{{Message: "before"}}
		}
		workload.FoldReasons(w, tc.in)
		got := ""
		if r := w.GetStatus().GetPendingReasons(); len(r) > 0 {
			got = r[0].GetMessage()
		}
		if got != tc.want {
			t.Errorf("%v with %d reasons: got %q, want %q", tc.phase, len(tc.in), got, tc.want)
		}
	}
}
