package workload

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// Status is written in one way only: a WorkloadEvent is folded into it by
// Fold, which appends the event to the history and moves the phase and the
// counters the event implies. This service folds SUBMITTED, SUSPENDED and
// RESUMED; the scheduler (SCHEDULED, PREEMPTED) and the node agents'
// reports (STARTED, FINISHED) fold theirs with the same function, so that
// the phase rules live in one place. Pod-level detail (status.pods, the
// allocated amounts, node_pool) is set by those writers before they fold
// the event that announces it.

// MaxEvents is how many events a status keeps: the latest ones, oldest first.
const MaxEvents = 100

// NewEvent is an event of type typ at time at, with a message for people.
func NewEvent(typ workloadv1.WorkloadEventType, at time.Time, message string) *workloadv1.WorkloadEvent {
	return &workloadv1.WorkloadEvent{Type: typ, Time: timestamppb.New(at), Message: message}
}

// Fold applies ev to w.Status (creating it if unset), sets w.update_time to
// the event's time, and appends ev to the events, dropping the oldest beyond
// MaxEvents. By event type:
//
//	SUBMITTED  phase PENDING, or STOPPED when spec.suspended; requested_pods
//	           from the spec; pending reason NOT_YET_CONSIDERED unless stopped.
//	SCHEDULED  running_pods += ev.pods and ev.nodes join nodes; pending
//	           reasons cleared; then as STARTED.
//	STARTED    RUNNING (start_time = ev.time) once min_pods of status.pods
//	           are reported running; until then a PENDING workload with
//	           bound pods has the one reason STARTING, naming them.
//	PREEMPTED  ev.pods 0 or >= running_pods: the whole workload is evicted,
//	           its placement cleared, preemption_count + 1, back to PENDING
//	           (STOPPED when suspended); otherwise running_pods -= ev.pods.
//	SUSPENDED  STOPPED at once when the workload holds nothing (not RUNNING,
//	           no running pods); otherwise unchanged until Released.
//	RESUMED    STOPPED becomes PENDING with NOT_YET_CONSIDERED.
//	FINISHED   FAILED when a pod in status.pods failed, else COMPLETED;
//	           end_time = ev.time; placement and pending reasons cleared.
//	LIMIT_REACHED  history only: the controller sets spec.suspended with it,
//	           and the workload is released like a suspended one.
//
// A RUNNING workload that stops running (preempted, released, finished)
// adds the run (ev.time - start_time) to running_time.
//
// A final workload (COMPLETED or FAILED) keeps its phase whatever is folded
// later; the event is still recorded.
func Fold(w *workloadv1.Workload, ev *workloadv1.WorkloadEvent) {
	if w.Status == nil {
		w.Status = &workloadv1.WorkloadStatus{}
	}
	st := w.Status
	if IsFinal(st.GetPhase()) && (ev.GetType() == workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SCHEDULED ||
		ev.GetType() == workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED) {
		// Its pods have ended: a late placement event (a binding left after
		// the pods exited, lost with its node) is not true of it.
		return
	}
	if ev.GetTime() != nil {
		w.UpdateTime = ev.GetTime()
	}
	st.Events = append(st.Events, ev)
	if n := len(st.Events); n > MaxEvents {
		st.Events = slices.Delete(st.Events, 0, n-MaxEvents)
	}
	if IsFinal(st.GetPhase()) {
		return
	}
	suspended := w.GetSpec().GetSuspended()
	switch ev.GetType() {
	case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUBMITTED:
		st.RequestedPods = clusterproto.EffectivePods(w.GetSpec())
		if suspended {
			st.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED
			st.PendingReasons = nil
		} else {
			st.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING
			st.PendingReasons = notYetConsidered()
		}
	case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SCHEDULED:
		st.RunningPods += ev.GetPods()
		st.Nodes = mergeSorted(st.Nodes, ev.GetNodes())
		st.PendingReasons = nil
		startOrWait(w, ev)
	case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_STARTED:
		startOrWait(w, ev)
	case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED:
		if ev.GetPods() == 0 || ev.GetPods() >= st.RunningPods {
			// A consolidation move is bound again by the same plan: the event
			// shows it, the preemption count does not.
			if ev.GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_CONSOLIDATION {
				st.PreemptionCount++
			}
			release(w, ev.GetTime().AsTime())
		} else {
			st.RunningPods -= ev.GetPods()
		}
	case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUSPENDED:
		st.RequeueOnRelease = false // the owner's suspension wins over a pending requeue
		if st.Phase != workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING && st.RunningPods == 0 {
			st.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED
			st.PendingReasons = nil
		}
	case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_RESUMED:
		st.StopReason = ""
		st.RequeueOnRelease = false // resumed by its owner before the release: it keeps running
		if st.Phase == workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED {
			st.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING
			st.PendingReasons = notYetConsidered()
		}
	case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_FINISHED:
		phase := workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED
		for _, p := range st.GetPods() {
			if p.GetState() == workloadv1.PodState_POD_STATE_FAILED {
				phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED
			}
		}
		endRun(st, ev.GetTime().AsTime())
		clearPlacement(st)
		st.Phase = phase
		st.PendingReasons = nil
		st.EndTime = ev.GetTime()
	}
}

// startOrWait moves a workload whose pods are bound to RUNNING once
// min_pods of them run (as the node agent or the kubelet reports it): bound
// is not running, a pod may wait on its node for a long time. Until then a
// PENDING workload says what it waits for.
func startOrWait(w *workloadv1.Workload, ev *workloadv1.WorkloadEvent) {
	st := w.Status
	if st.Phase == workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING {
		return
	}
	minPods := clusterproto.EffectiveMinPods(w.GetSpec())
	var running int32
	var waiting []string
	for _, p := range st.GetPods() {
		if s := p.GetState(); s == workloadv1.PodState_POD_STATE_RUNNING || s == workloadv1.PodState_POD_STATE_SUCCEEDED {
			running++ // a pod that exited 0 has run
		} else {
			waiting = append(waiting, fmt.Sprintf("%d on %s", p.GetIndex(), strings.TrimPrefix(p.GetNode(), "nodes/")))
		}
	}
	if running >= minPods && running > 0 {
		st.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING
		st.StartTime = ev.GetTime()
		st.PendingReasons = nil
		return
	}
	if st.Phase != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING || len(waiting) == 0 {
		return
	}
	st.PendingReasons = []*workloadv1.PendingReason{{
		Check:    workloadv1.PendingCheck_PENDING_CHECK_STARTING,
		NodePool: st.GetNodePool(),
		Message: fmt.Sprintf("Bound, waiting for the pods to start (%d of %d running; waiting for pod %s).",
			running, minPods, strings.Join(waiting, ", ")),
	}}
}

// Released records that every pod of w is gone without an event of its own
// (the owner suspended it, or a node report closed the last pod): the
// placement is cleared and the phase becomes STOPPED when spec.suspended,
// else PENDING. Final workloads are left alone.
func Released(w *workloadv1.Workload, at time.Time) {
	if w.Status == nil {
		w.Status = &workloadv1.WorkloadStatus{}
	}
	if IsFinal(w.Status.GetPhase()) {
		return
	}
	if w.Status.GetRequeueOnRelease() && !gangRestarting(w.Status) {
		w.Status.PreemptionCount++ // the controller's preemption (a scheduler's counts in Fold)
	}
	release(w, at)
	w.UpdateTime = timestamppb.New(at)
}

// release ends the run, clears the placement and sets the phase a workload
// holding nothing has. A workload the controller suspended only to preempt
// it (requeue_on_release) is resumed here: back to PENDING.
func release(w *workloadv1.Workload, at time.Time) {
	st := w.Status
	endRun(st, at)
	clearPlacement(st)
	if st.GetRequeueOnRelease() {
		st.RequeueOnRelease = false
		w.Spec.Suspended = false
		st.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING
		st.PendingReasons = notYetConsidered()
		return
	}
	if w.GetSpec().GetSuspended() {
		st.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED
		st.PendingReasons = nil
	} else {
		st.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING
	}
}

// endRun adds the current run to running_time when the workload is RUNNING.
func endRun(st *workloadv1.WorkloadStatus, at time.Time) {
	if st.GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING || st.GetStartTime() == nil {
		return
	}
	if run := at.Sub(st.GetStartTime().AsTime()); run > 0 {
		st.RunningTime = durationpb.New(st.GetRunningTime().AsDuration() + run)
	}
}

// RunningTime is how long w has been RUNNING in total at now: its earlier
// runs plus the current one.
func RunningTime(w *workloadv1.Workload, now time.Time) time.Duration {
	st := w.GetStatus()
	total := st.GetRunningTime().AsDuration()
	if st.GetPhase() == workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING && st.GetStartTime() != nil {
		total += max(now.Sub(st.GetStartTime().AsTime()), 0)
	}
	return total
}

func clearPlacement(st *workloadv1.WorkloadStatus) {
	st.RunningPods = 0
	st.AllocatedMilliGpus, st.AllocatedMilliCpu, st.AllocatedMemoryBytes = 0, 0, 0
	st.NodePool = ""
	st.Nodes = nil
	st.Pods = nil
	st.GpuIdleTime = nil
}

// FoldReasons sets the scheduler's latest reasons (its record under
// etcdstore.PrefixReasons) as the pending reasons of a PENDING workload.
// In any other phase it does nothing: Fold clears the reasons when the
// workload is scheduled, stopped or finished, and a record that outlives
// that (it is deleted in the transaction that binds the workload) must not
// bring them back. An empty set leaves the current reasons as they are.
func FoldReasons(w *workloadv1.Workload, reasons []*workloadv1.PendingReason) {
	if w.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING || len(reasons) == 0 {
		return
	}
	w.Status.PendingReasons = reasons
}

// IsFinal reports whether a phase is final (COMPLETED or FAILED): nothing
// changes it any more, and Suspend/Resume fail on it.
func IsFinal(p workloadv1.WorkloadPhase) bool {
	return p == workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED || p == workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED
}

func notYetConsidered() []*workloadv1.PendingReason {
	return []*workloadv1.PendingReason{{
		Check:   workloadv1.PendingCheck_PENDING_CHECK_NOT_YET_CONSIDERED,
		Message: "Waiting for the next scheduling cycle.",
	}}
}

// mergeSorted is the sorted union of a and b without duplicates.
func mergeSorted(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
