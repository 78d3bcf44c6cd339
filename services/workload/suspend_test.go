package workload_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/workload"
)

// writeStatus changes a stored workload the way the status writers (the
// scheduler, the node agents' reports) will: read, fold, write back.
func (e *env) writeStatus(t testing.TB, w *workloadv1.Workload, change func(*workloadv1.Workload)) *workloadv1.Workload {
	t.Helper()
	coll := etcdstore.NewCollection(e.etcd.Client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	project, id, _ := workload.ParseWorkloadName(w.GetName())
	it, err := coll.Get(context.Background(), clusterproto.ClusterID(project, id))
	if err != nil {
		t.Fatal(err)
	}
	change(it.Msg)
	it, err = coll.Update(context.Background(), clusterproto.ClusterID(project, id), it.Msg, it.Etag)
	if err != nil {
		t.Fatal(err)
	}
	out := proto.Clone(it.Msg).(*workloadv1.Workload)
	out.Etag = it.Etag
	return out
}

// setPhase ends or places a workload as its status writers would.
func (e *env) setPhase(t testing.TB, w *workloadv1.Workload, phase workloadv1.WorkloadPhase) *workloadv1.Workload {
	t.Helper()
	return e.writeStatus(t, w, func(w *workloadv1.Workload) {
		switch phase {
		case workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING:
			ev := workload.NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SCHEDULED, t0, "Scheduled.")
			ev.Pods, ev.Nodes = w.GetSpec().GetPods(), []string{"nodes/n1"}
			for i := range max(w.GetSpec().GetPods(), 1) { // reported running: RUNNING needs that
				w.Status.Pods = append(w.Status.Pods, &workloadv1.PodStatus{Index: i, Node: "nodes/n1", State: workloadv1.PodState_POD_STATE_RUNNING})
			}
			workload.Fold(w, ev)
		case workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED:
			w.Status.Pods = []*workloadv1.PodStatus{{State: workloadv1.PodState_POD_STATE_FAILED, ExitCode: 1}}
			workload.Fold(w, workload.NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_FINISHED, t0, "Failed."))
		case workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED:
			workload.Fold(w, workload.NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_FINISHED, t0, "Completed."))
		}
		if w.GetStatus().GetPhase() != phase {
			t.Fatalf("folding gave phase %v, want %v", w.GetStatus().GetPhase(), phase)
		}
	})
}

func lastEvent(w *workloadv1.Workload) workloadv1.WorkloadEventType {
	ev := w.GetStatus().GetEvents()
	return ev[len(ev)-1].GetType()
}

func TestSuspendResume_Transitions(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	ctx := t.Context()
	w := e.create(t, "team-a", "a1", training())

	suspended, err := e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: w.GetName(), Etag: w.GetEtag()})
	if err != nil {
		t.Fatal(err)
	}
	if !suspended.GetSpec().GetSuspended() || suspended.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED ||
		lastEvent(suspended) != workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUSPENDED ||
		len(suspended.GetStatus().GetPendingReasons()) != 0 || suspended.GetEtag() == w.GetEtag() {
		t.Errorf("after suspend: %v", suspended)
	}
	again, err := e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: w.GetName()})
	if err != nil || again.GetEtag() != suspended.GetEtag() {
		t.Errorf("suspend again = etag %q, %v; want the same workload unchanged (etag %q)", again.GetEtag(), err, suspended.GetEtag())
	}
	_, err = e.client.ResumeWorkload(ctx, &workloadv1.ResumeWorkloadRequest{Name: w.GetName(), Etag: w.GetEtag()})
	wantError(t, err, codes.Aborted, "ETAG_MISMATCH")

	resumed, err := e.client.ResumeWorkload(ctx, &workloadv1.ResumeWorkloadRequest{Name: w.GetName(), Etag: suspended.GetEtag()})
	if err != nil {
		t.Fatal(err)
	}
	if resumed.GetSpec().GetSuspended() || resumed.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING ||
		lastEvent(resumed) != workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_RESUMED ||
		len(resumed.GetStatus().GetEvents()) != 3 || !resumed.GetCreateTime().AsTime().Equal(w.GetCreateTime().AsTime()) {
		t.Errorf("after resume: %v", resumed)
	}
	again, err = e.client.ResumeWorkload(ctx, &workloadv1.ResumeWorkloadRequest{Name: w.GetName()})
	if err != nil || again.GetEtag() != resumed.GetEtag() {
		t.Errorf("resume again = etag %q, %v; want the same workload unchanged (etag %q)", again.GetEtag(), err, resumed.GetEtag())
	}
}

// A RUNNING workload that is suspended holds its pods until the scheduler
// releases them; only then is it STOPPED.
func TestSuspendWorkload_Running(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := e.setPhase(t, e.create(t, "team-a", "a1", training()), workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING)
	got, err := e.client.SuspendWorkload(t.Context(), &workloadv1.SuspendWorkloadRequest{Name: w.GetName(), Etag: w.GetEtag()})
	if err != nil {
		t.Fatal(err)
	}
	if !got.GetSpec().GetSuspended() || got.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING {
		t.Errorf("suspended %v phase %v, want suspended and still RUNNING", got.GetSpec().GetSuspended(), got.GetStatus().GetPhase())
	}
	released := e.writeStatus(t, got, func(w *workloadv1.Workload) { workload.Released(w, t0) })
	if released.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED || released.GetStatus().GetRunningPods() != 0 {
		t.Errorf("after release: phase %v running %d, want STOPPED 0", released.GetStatus().GetPhase(), released.GetStatus().GetRunningPods())
	}
}

func TestSuspendResume_InvalidTransitions(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	ctx := t.Context()
	completed := e.setPhase(t, e.create(t, "team-a", "done", training()), workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED)
	failed := e.setPhase(t, e.create(t, "team-a", "broke", training()), workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED)
	suspend := func(name string) error {
		_, err := e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: name})
		return err
	}
	resume := func(name string) error {
		_, err := e.client.ResumeWorkload(ctx, &workloadv1.ResumeWorkloadRequest{Name: name})
		return err
	}
	for name, tc := range map[string]struct {
		call      func(string) error
		w         *workloadv1.Workload
		wantPhase string
	}{
		"suspending a completed workload": {suspend, completed, "COMPLETED"},
		"resuming a completed workload":   {resume, completed, "COMPLETED"},
		"suspending a failed workload":    {suspend, failed, "FAILED"},
		"resuming a failed workload":      {resume, failed, "FAILED"},
	} {
		t.Run(name, func(t *testing.T) {
			md := wantError(t, tc.call(tc.w.GetName()), codes.FailedPrecondition, "INVALID_STATE_TRANSITION")
			if md["name"] != tc.w.GetName() || md["phase"] != tc.wantPhase {
				t.Errorf("metadata %v, want name %q phase %s", md, tc.w.GetName(), tc.wantPhase)
			}
		})
	}
	for name, call := range map[string]func(string) error{"suspending": suspend, "resuming": resume} {
		t.Run(name+" a workload that does not exist", func(t *testing.T) {
			wantError(t, call("projects/team-a/workloads/nope"), codes.NotFound, "WORKLOAD_NOT_FOUND")
		})
	}
}
