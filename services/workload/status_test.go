package workload_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/workload"
)

func event(typ workloadv1.WorkloadEventType, sec int, pods int32, nodes ...string) *workloadv1.WorkloadEvent {
	ev := workload.NewEvent(typ, t0.Add(time.Duration(sec)*time.Second), "")
	ev.Pods, ev.Nodes = pods, nodes
	return ev
}

func at(sec int) *timestamppb.Timestamp {
	return timestamppb.New(t0.Add(time.Duration(sec) * time.Second))
}

const (
	submittedEv = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUBMITTED
	scheduledEv = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SCHEDULED
	startedEv   = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_STARTED
	preemptedEv = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED
	suspendedEv = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUSPENDED
	resumedEv   = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_RESUMED
	finishedEv  = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_FINISHED

	pending   = workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING
	running   = workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING
	completed = workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED
	failed    = workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED
	stopped   = workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED
)

var waiting = []*workloadv1.PendingReason{{
	Check: workloadv1.PendingCheck_PENDING_CHECK_NOT_YET_CONSIDERED, Message: "Waiting for the next scheduling cycle.",
}}

// moved marks an eviction as a consolidation move.
func moved(ev *workloadv1.WorkloadEvent) *workloadv1.WorkloadEvent {
	ev.Rule = workloadv1.SchedulingRule_SCHEDULING_RULE_CONSOLIDATION
	return ev
}

func TestFold(t *testing.T) {
	gang := &workloadv1.WorkloadSpec{Image: "x", Pods: 4, MinPods: 2}
	for name, tc := range map[string]struct {
		spec       *workloadv1.WorkloadSpec
		suspendAt  int // fold events after setting spec.suspended from this index; -1 never
		events     []*workloadv1.WorkloadEvent
		podsBefore []*workloadv1.PodStatus // status.pods set before the last event
		// notStarted: the pods a SCHEDULED event binds are not yet reported
		// running (by default they are, as the controller sets status.pods
		// before it folds the event).
		notStarted bool
		// late: the last events are placement events after the end, which
		// the history does not keep (they are not true of it).
		late int
		want *workloadv1.WorkloadStatus
	}{
		"bound pods that do not run yet leave it pending, saying so": {
			spec: gang, suspendAt: -1, notStarted: true, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 2, "nodes/n1")},
			want: &workloadv1.WorkloadStatus{Phase: pending, RequestedPods: 4, RunningPods: 2, Nodes: []string{"nodes/n1"},
				PendingReasons: []*workloadv1.PendingReason{{Check: workloadv1.PendingCheck_PENDING_CHECK_STARTING,
					Message: "Bound, waiting for the pods to start (0 of 2 running; waiting for pod 0 on n1, 1 on n1)."}}},
		},
		"a submitted workload waits for a cycle": {
			spec: gang, suspendAt: -1, events: []*workloadv1.WorkloadEvent{event(submittedEv, 0, 0)},
			want: &workloadv1.WorkloadStatus{Phase: pending, RequestedPods: 4, PendingReasons: waiting},
		},
		"a workload submitted suspended is stopped": {
			spec: gang, suspendAt: 0, events: []*workloadv1.WorkloadEvent{event(submittedEv, 0, 0)},
			want: &workloadv1.WorkloadStatus{Phase: stopped, RequestedPods: 4},
		},
		"pods below the minimum leave it pending": {
			spec: gang, suspendAt: -1, events: []*workloadv1.WorkloadEvent{event(submittedEv, 0, 0), event(scheduledEv, 1, 1, "nodes/n2")},
			want: &workloadv1.WorkloadStatus{Phase: pending, RequestedPods: 4, RunningPods: 1, Nodes: []string{"nodes/n2"}},
		},
		"reaching the minimum runs it from then": {
			spec: gang, suspendAt: -1, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 2, "nodes/n2", "nodes/n1"), event(scheduledEv, 2, 1, "nodes/n1"), event(startedEv, 3, 0)},
			want: &workloadv1.WorkloadStatus{Phase: running, RequestedPods: 4, RunningPods: 3,
				Nodes: []string{"nodes/n1", "nodes/n2"}, StartTime: at(1)},
		},
		"a whole preemption sends it back to pending and counts": {
			spec: gang, suspendAt: -1, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 2, "nodes/n1"), event(preemptedEv, 2, 0)},
			want: &workloadv1.WorkloadStatus{Phase: pending, RequestedPods: 4, PreemptionCount: 1, StartTime: at(1),
				RunningTime: durationpb.New(time.Second)},
		},
		"a consolidation move is shown, bound again, and not counted as a preemption": {
			spec: gang, suspendAt: -1, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 2, "nodes/n1"),
				moved(event(preemptedEv, 2, 0)), event(scheduledEv, 2, 2, "nodes/n2")},
			want: &workloadv1.WorkloadStatus{Phase: running, RequestedPods: 4, RunningPods: 2, Nodes: []string{"nodes/n2"},
				StartTime: at(2), RunningTime: durationpb.New(time.Second)},
		},
		"running time adds up the runs, not the time pending between them": {
			spec: gang, suspendAt: -1, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 2, "nodes/n1"), event(preemptedEv, 3, 0),
				event(scheduledEv, 10, 2, "nodes/n2"), event(preemptedEv, 14, 0)},
			want: &workloadv1.WorkloadStatus{Phase: pending, RequestedPods: 4, PreemptionCount: 2, StartTime: at(10),
				RunningTime: durationpb.New(6 * time.Second)},
		},
		"losing elastic pods keeps it running": {
			spec: gang, suspendAt: -1, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 4, "nodes/n1"), event(preemptedEv, 2, 2, "nodes/n1")},
			want: &workloadv1.WorkloadStatus{Phase: running, RequestedPods: 4, RunningPods: 2, Nodes: []string{"nodes/n1"}, StartTime: at(1)},
		},
		"suspending a pending workload stops it at once": {
			spec: gang, suspendAt: 1, events: []*workloadv1.WorkloadEvent{event(submittedEv, 0, 0), event(suspendedEv, 1, 0)},
			want: &workloadv1.WorkloadStatus{Phase: stopped, RequestedPods: 4},
		},
		"a suspended running workload runs until its pods are released": {
			spec: gang, suspendAt: 2, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 2, "nodes/n1"), event(suspendedEv, 2, 0)},
			want: &workloadv1.WorkloadStatus{Phase: running, RequestedPods: 4, RunningPods: 2, Nodes: []string{"nodes/n1"}, StartTime: at(1)},
		},
		"a suspended workload holding pods below its minimum waits for their release": {
			spec: gang, suspendAt: 2, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 1, "nodes/n1"), event(suspendedEv, 2, 0)},
			want: &workloadv1.WorkloadStatus{Phase: pending, RequestedPods: 4, RunningPods: 1, Nodes: []string{"nodes/n1"}},
		},
		"resuming a stopped workload makes it pending": {
			spec: gang, suspendAt: 1, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(suspendedEv, 1, 0), event(resumedEv, 2, 0)},
			want: &workloadv1.WorkloadStatus{Phase: pending, RequestedPods: 4, PendingReasons: waiting},
		},
		"finishing with every pod succeeded completes it": {
			spec: gang, suspendAt: -1, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 2, "nodes/n1"), event(finishedEv, 5, 0)},
			podsBefore: []*workloadv1.PodStatus{{Index: 0, State: workloadv1.PodState_POD_STATE_SUCCEEDED}},
			want: &workloadv1.WorkloadStatus{Phase: completed, RequestedPods: 4, StartTime: at(1), EndTime: at(5),
				RunningTime: durationpb.New(4 * time.Second)},
		},
		"finishing with a failed pod fails it": {
			spec: gang, suspendAt: -1, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(scheduledEv, 1, 2, "nodes/n1"), event(finishedEv, 5, 0)},
			podsBefore: []*workloadv1.PodStatus{
				{Index: 0, State: workloadv1.PodState_POD_STATE_SUCCEEDED}, {Index: 1, State: workloadv1.PodState_POD_STATE_FAILED, ExitCode: 3}},
			want: &workloadv1.WorkloadStatus{Phase: failed, RequestedPods: 4, StartTime: at(1), EndTime: at(5),
				RunningTime: durationpb.New(4 * time.Second)},
		},
		"nothing moves a finished workload, and its history shows no placement after its end": {
			spec: gang, suspendAt: -1, late: 2, events: []*workloadv1.WorkloadEvent{
				event(submittedEv, 0, 0), event(finishedEv, 1, 0), event(resumedEv, 2, 0), event(scheduledEv, 3, 2),
				event(preemptedEv, 4, 2)},
			want: &workloadv1.WorkloadStatus{Phase: completed, RequestedPods: 4, EndTime: at(1)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: &workloadv1.WorkloadSpec{
				Image: tc.spec.GetImage(), Pods: tc.spec.GetPods(), MinPods: tc.spec.GetMinPods()}}
			for i, ev := range tc.events {
				if i == tc.suspendAt {
					w.Spec.Suspended = true
				}
				if i == len(tc.events)-1 && tc.podsBefore != nil {
					w.Status.Pods = tc.podsBefore
				}
				if ev.GetType() == scheduledEv && !workload.IsFinal(w.GetStatus().GetPhase()) {
					state := workloadv1.PodState_POD_STATE_RUNNING
					if tc.notStarted {
						state = workloadv1.PodState_POD_STATE_BOUND
					}
					for range ev.GetPods() {
						w.Status.Pods = append(w.Status.Pods, &workloadv1.PodStatus{Index: int32(len(w.Status.Pods)), Node: ev.GetNodes()[0], State: state})
					}
				}
				workload.Fold(w, ev)
			}
			kept := tc.events[:len(tc.events)-tc.late]
			tc.want.Events = kept
			// status.pods is this test's input (the controller's); Fold only clears it.
			if diff := cmp.Diff(tc.want, w.GetStatus(), protocmp.Transform(), protocmp.IgnoreFields(&workloadv1.WorkloadStatus{}, "pods")); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if tc.want.GetRunningPods() == 0 && len(w.GetStatus().GetPods()) != 0 {
				t.Errorf("pods %v left on a workload that holds none", w.GetStatus().GetPods())
			}
			if last := kept[len(kept)-1].GetTime(); !w.GetUpdateTime().AsTime().Equal(last.AsTime()) {
				t.Errorf("update_time %v, want the last kept event's %v", w.GetUpdateTime().AsTime(), last.AsTime())
			}
		})
	}
}

func TestFold_KeepsTheLastEvents(t *testing.T) {
	w := &workloadv1.Workload{Spec: &workloadv1.WorkloadSpec{Image: "x"}}
	workload.Fold(w, event(submittedEv, 0, 0))
	for i := 1; i <= workload.MaxEvents+10; i++ {
		typ := suspendedEv
		if i%2 == 0 {
			typ = resumedEv
		}
		workload.Fold(w, event(typ, i, 0))
	}
	events := w.GetStatus().GetEvents()
	if len(events) != workload.MaxEvents {
		t.Fatalf("%d events kept, want %d", len(events), workload.MaxEvents)
	}
	if first, last := events[0].GetTime().AsTime(), events[len(events)-1].GetTime().AsTime(); !first.Equal(t0.Add(11*time.Second)) ||
		!last.Equal(t0.Add(time.Duration(workload.MaxEvents+10)*time.Second)) {
		t.Errorf("events from %v to %v, want the latest %d, oldest first", first, last, workload.MaxEvents)
	}
}

func TestReleased(t *testing.T) {
	for name, tc := range map[string]struct {
		suspended bool
		wantPhase workloadv1.WorkloadPhase
	}{
		"a suspended workload whose pods are gone is stopped": {true, stopped},
		"a workload whose pods are gone otherwise is pending": {false, pending},
	} {
		t.Run(name, func(t *testing.T) {
			w := &workloadv1.Workload{Spec: &workloadv1.WorkloadSpec{Image: "x", Suspended: tc.suspended}, Status: &workloadv1.WorkloadStatus{
				Phase: running, RunningPods: 1, AllocatedMilliGpus: 500, NodePool: "nodepools/default", Nodes: []string{"nodes/n1"},
				Pods: []*workloadv1.PodStatus{{Node: "nodes/n1"}}}}
			workload.Released(w, t0)
			want := &workloadv1.WorkloadStatus{Phase: tc.wantPhase}
			if diff := cmp.Diff(want, w.GetStatus(), protocmp.Transform()); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}
