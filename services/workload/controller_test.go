package workload_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/workload"
)

// runController starts a Controller on the env's etcd and returns its stop
// function (also registered as a cleanup), which waits for Run to return.
func (e *env) runController(t *testing.T) func() {
	t.Helper()
	return e.runControllerWith(t, &fixedClock{})
}

// runControllerWith is runController with a clock and options.
func (e *env) runControllerWith(t *testing.T, clock workload.Clock, opts ...workload.ControllerOption) func() {
	t.Helper()
	c, err := workload.NewController(workload.Deps{
		Client: e.etcd.Client, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clock,
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// bind writes a pod's binding as the scheduler does.
func (e *env) bind(t *testing.T, node, project, id string, pod int32) {
	t.Helper()
	ps := &workloadv1.PodStatus{Index: pod, Node: "nodes/" + node, FractionMilli: 1000, DeviceIndexes: []int32{0},
		State: workloadv1.PodState_POD_STATE_BOUND}
	if _, err := etcdstore.NewBatch(e.etcd.Client).Put(bindingKey(node, project, id, pod), ps).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// bindRunning binds a pod and then reports it RUNNING, as its node agent
// does once the process started: the workload runs only then.
func (e *env) bindRunning(t *testing.T, node, project, id string, pod int32) {
	t.Helper()
	e.bind(t, node, project, id, pod)
	e.report(t, node, project, id, pod, workloadv1.PodState_POD_STATE_RUNNING, 0)
}

func bindingKey(node, project, id string, pod int32) string {
	return fmt.Sprintf("%s%s/%s.%s.%d", etcdstore.PrefixBindings, node, project, id, pod)
}

// report writes a pod's run report as the node agent does.
func (e *env) report(t *testing.T, node, project, id string, pod int32, state workloadv1.PodState, exit int32) {
	t.Helper()
	e.putRun(t, &nodemanagerv1.ReportWorkloadStateRequest{Node: "nodes/" + node, Workload: "projects/" + project + "/workloads/" + id,
		PodIndex: pod, State: state, ExitCode: exit, ObserveTime: timestamppb.Now()})
}

// putRun writes a run report as is, under its node's and pod's key.
func (e *env) putRun(t *testing.T, rep *nodemanagerv1.ReportWorkloadStateRequest) {
	t.Helper()
	project, id, _ := workload.ParseWorkloadName(rep.GetWorkload())
	key := fmt.Sprintf("%s%s/%s.%s.%d", etcdstore.PrefixRuns, strings.TrimPrefix(rep.GetNode(), "nodes/"), project, id, rep.GetPodIndex())
	if _, err := etcdstore.NewBatch(e.etcd.Client).Put(key, rep).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// runningJob is team-a's workload "job", its pod 0 bound on n1 and
// reported RUNNING, its controller running.
func (e *env) runningJob(t *testing.T) *workloadv1.Workload {
	t.Helper()
	e.addProjects(t, "team-a")
	w := e.create(t, "team-a", "job", training())
	e.runController(t)
	e.bindRunning(t, "n1", "team-a", "job", 0)
	e.await(t, w.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	return w
}

// await polls the workload until ok holds (5 s at most).
func (e *env) await(t *testing.T, name string, what string, ok func(*workloadv1.Workload) bool) *workloadv1.Workload {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w, err := e.client.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if ok(w) {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out; status %v", what, w.GetStatus())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func eventTypes(w *workloadv1.Workload) []workloadv1.WorkloadEventType {
	var out []workloadv1.WorkloadEventType
	for _, ev := range w.GetStatus().GetEvents() {
		out = append(out, ev.GetType())
	}
	return out
}

const (
	evSubmitted = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUBMITTED
	evScheduled = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SCHEDULED
	evStarted   = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_STARTED
	evPreempted = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED
	evSuspended = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUSPENDED
	evFinished  = workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_FINISHED
)

func phaseIs(p workloadv1.WorkloadPhase) func(*workloadv1.Workload) bool {
	return func(w *workloadv1.Workload) bool { return w.GetStatus().GetPhase() == p }
}

// stable waits a little and checks that the workload was not written again.
func (e *env) stable(t *testing.T, w *workloadv1.Workload) {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
	got, err := e.client.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: w.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetEtag() != w.GetEtag() {
		t.Errorf("workload rewritten with nothing new: events %v, were %v", eventTypes(got), eventTypes(w))
	}
}

func TestController_BindRunFinish(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	spec := training()
	spec.Spec.Pods = 2
	w := e.create(t, "team-a", "train", spec)
	stop := e.runController(t)

	e.bind(t, "n1", "team-a", "train", 0)
	got := e.await(t, w.GetName(), "one pod bound", func(w *workloadv1.Workload) bool { return w.GetStatus().GetRunningPods() == 1 })
	if p := got.GetStatus().GetPhase(); p != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING {
		t.Errorf("phase with 1 of 2 pods bound %v, want PENDING", p)
	}
	e.bind(t, "n2", "team-a", "train", 1)
	got = e.await(t, w.GetName(), "both pods bound", func(w *workloadv1.Workload) bool { return w.GetStatus().GetRunningPods() == 2 })
	// Bound is not running: without a run report it stays PENDING and says why.
	if st := got.GetStatus(); st.GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING || st.GetStartTime() != nil ||
		len(st.GetPendingReasons()) != 1 || st.GetPendingReasons()[0].GetCheck() != workloadv1.PendingCheck_PENDING_CHECK_STARTING ||
		!strings.Contains(st.GetPendingReasons()[0].GetMessage(), "0 of 2 running; waiting for pod 0 on n1, 1 on n2") {
		t.Errorf("bound, not started: phase %v, start %v, reasons %v; want PENDING with STARTING naming both pods", st.GetPhase(), st.GetStartTime(), st.GetPendingReasons())
	}
	e.report(t, "n1", "team-a", "train", 0, workloadv1.PodState_POD_STATE_RUNNING, 0)
	got = e.await(t, w.GetName(), "one started", func(w *workloadv1.Workload) bool { return slices.Contains(eventTypes(w), evStarted) })
	if st := got.GetStatus(); st.GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING ||
		!strings.Contains(st.GetPendingReasons()[0].GetMessage(), "1 of 2 running; waiting for pod 1 on n2") {
		t.Errorf("1 of 2 started: phase %v, reasons %v; want PENDING waiting for pod 1", st.GetPhase(), st.GetPendingReasons())
	}
	e.report(t, "n2", "team-a", "train", 1, workloadv1.PodState_POD_STATE_RUNNING, 0)
	got = e.await(t, w.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	st := got.GetStatus()
	if st.GetRunningPods() != 2 || !slices.Equal(st.GetNodes(), []string{"nodes/n1", "nodes/n2"}) ||
		st.GetAllocatedMilliGpus() != 2000 || len(st.GetPods()) != 2 || st.GetStartTime() == nil {
		t.Errorf("running status %v", st)
	}
	if len(st.GetPendingReasons()) != 0 {
		t.Errorf("running with pending reasons %v", st.GetPendingReasons())
	}
	if want := []workloadv1.WorkloadEventType{evSubmitted, evScheduled, evScheduled, evStarted, evStarted}; !slices.Equal(eventTypes(got), want) {
		t.Errorf("events %v, want %v", eventTypes(got), want)
	}

	// A restart re-folds the same bindings and reports: nothing is added.
	stop()
	e.runController(t)
	e.stable(t, got)

	e.report(t, "n1", "team-a", "train", 0, workloadv1.PodState_POD_STATE_SUCCEEDED, 0)
	e.report(t, "n2", "team-a", "train", 1, workloadv1.PodState_POD_STATE_SUCCEEDED, 0)
	got = e.await(t, w.GetName(), "completed", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED))
	if st := got.GetStatus(); st.GetRunningPods() != 0 || len(st.GetNodes()) != 0 || st.GetEndTime() == nil {
		t.Errorf("completed status %v", st)
	}
	types := eventTypes(got)
	if types[len(types)-1] != evFinished || slices.Index(types, evStarted) < 0 ||
		len(slices.DeleteFunc(slices.Clone(types), func(t workloadv1.WorkloadEventType) bool { return t != evScheduled })) != 2 {
		t.Errorf("events %v: want 2 SCHEDULED, STARTED and FINISHED last", types)
	}
	e.stable(t, got)
}

func TestController_FailedExitCode(t *testing.T) {
	e := start(t)
	w := e.runningJob(t)
	e.report(t, "n1", "team-a", "job", 0, workloadv1.PodState_POD_STATE_SUCCEEDED, 3)
	got := e.await(t, w.GetName(), "failed", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED))
	if want := []workloadv1.WorkloadEventType{evSubmitted, evScheduled, evStarted, evFinished}; !slices.Equal(eventTypes(got), want) {
		t.Errorf("events %v, want %v", eventTypes(got), want)
	}
}

// The agent's reason for a failed pod (here the GPU memory slice) is in
// the workload's FINISHED event.
func TestController_FailedPodReasonInEvent(t *testing.T) {
	e := start(t)
	w := e.runningJob(t)
	const why = "Out of GPU memory: the pod used 46.6 GiB on GPU 1, over its slice of 40.0 GiB; the node agent ended it."
	e.putRun(t, &nodemanagerv1.ReportWorkloadStateRequest{Node: "nodes/n1", Workload: w.GetName(), PodIndex: 0,
		State: workloadv1.PodState_POD_STATE_FAILED, ExitCode: 137, Message: why, ObserveTime: timestamppb.Now()})
	got := e.await(t, w.GetName(), "failed", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED))
	evs := got.GetStatus().GetEvents()
	if last := evs[len(evs)-1]; last.GetType() != evFinished || last.GetMessage() != "Pod 0 failed (exit code 137): "+why {
		t.Errorf("last event = %v, want FINISHED with the reason", last)
	}
}

// A pod its agent started again after it died while the agent was down
// (agent_restarts in its run report) gets one STARTED event per restart
// saying so, and no more when the same count is reported again, its
// final report too.
func TestController_RestartAfterAgentFailureIsAnEvent(t *testing.T) {
	e := start(t)
	w := e.runningJob(t)
	put := func(state workloadv1.PodState, restarts int32) {
		t.Helper()
		e.putRun(t, &nodemanagerv1.ReportWorkloadStateRequest{Node: "nodes/n1", Workload: w.GetName(), PodIndex: 0,
			State: state, ObserveTime: timestamppb.Now(), AgentRestarts: restarts})
	}
	restarts := func(w *workloadv1.Workload) int {
		n := 0
		for _, ev := range w.GetStatus().GetEvents() {
			if ev.GetType() == evStarted && ev.GetMessage() == "Pod 0 "+workload.RestartedAfterAgentFailure+"." {
				n++
			}
		}
		return n
	}
	put(workloadv1.PodState_POD_STATE_RUNNING, 1)
	e.await(t, w.GetName(), "one restart event", func(w *workloadv1.Workload) bool { return restarts(w) == 1 })
	put(workloadv1.PodState_POD_STATE_RUNNING, 2) // died again with its next agent
	e.await(t, w.GetName(), "two restart events, counted in the pod's status", func(w *workloadv1.Workload) bool {
		pods := w.GetStatus().GetPods()
		return restarts(w) == 2 && len(pods) == 1 && pods[0].GetAgentRestarts() == 2
	})
	put(workloadv1.PodState_POD_STATE_SUCCEEDED, 2)
	got := e.await(t, w.GetName(), "completed", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED))
	if n := restarts(got); n != 2 {
		t.Errorf("%d restart events after the final report, want 2", n)
	}
}

func TestController_EvictionConsumedOnce(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := e.create(t, "team-a", "train", training())
	stop := e.runController(t)
	e.bindRunning(t, "n1", "team-a", "train", 0)
	e.await(t, w.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))

	// The scheduler's eviction: the binding deleted and the event put in one
	// transaction.
	evKey := fmt.Sprintf("%steam-a/train/%020d-1", etcdstore.PrefixEvictions, time.Now().UnixNano())
	ev := &workloadv1.WorkloadEvent{Type: evPreempted, Time: timestamppb.Now(), Message: "Preempted.",
		By: "projects/team-a/workloads/urgent", Rule: workloadv1.SchedulingRule_SCHEDULING_RULE_PREEMPT,
		Pods: 1, Nodes: []string{"nodes/n1"}}
	if _, err := etcdstore.NewBatch(e.etcd.Client).Delete(bindingKey("n1", "team-a", "train", 0)).Put(evKey, ev).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := e.await(t, w.GetName(), "preempted", func(w *workloadv1.Workload) bool { return w.GetStatus().GetPreemptionCount() == 1 })
	st := got.GetStatus()
	if st.GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING || st.GetRunningPods() != 0 ||
		len(st.GetNodes()) != 0 || st.GetAllocatedMilliGpus() != 0 || len(st.GetPods()) != 0 {
		t.Errorf("preempted status %v", st)
	}
	last := st.GetEvents()[len(st.GetEvents())-1]
	if last.GetType() != evPreempted || last.GetBy() != "projects/team-a/workloads/urgent" ||
		last.GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_PREEMPT {
		t.Errorf("last event %v", last)
	}
	resp, err := e.etcd.Client.Get(t.Context(), etcdstore.PrefixEvictions, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d eviction keys left, want 0 (consumed)", resp.Count)
	}

	stop()
	e.runController(t)
	e.stable(t, got)

	// Bound again after the eviction: SCHEDULED once more, count kept.
	e.bindRunning(t, "n2", "team-a", "train", 0)
	got = e.await(t, w.GetName(), "running again", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	if got.GetStatus().GetPreemptionCount() != 1 || !slices.Equal(got.GetStatus().GetNodes(), []string{"nodes/n2"}) {
		t.Errorf("rebound status %v", got.GetStatus())
	}
	want := []workloadv1.WorkloadEventType{evSubmitted, evScheduled, evStarted, evPreempted, evScheduled, evStarted}
	if !slices.Equal(eventTypes(got), want) {
		t.Errorf("events %v, want %v", eventTypes(got), want)
	}
}

func TestController_SuspendedReleased(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := e.create(t, "team-a", "nb", training())
	e.runController(t)
	e.bindRunning(t, "n1", "team-a", "nb", 0)
	e.await(t, w.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	if _, err := e.client.SuspendWorkload(t.Context(), &workloadv1.SuspendWorkloadRequest{Name: w.GetName()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.etcd.Client.Delete(t.Context(), bindingKey("n1", "team-a", "nb", 0)); err != nil {
		t.Fatal(err)
	}
	got := e.await(t, w.GetName(), "stopped", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED))
	if st := got.GetStatus(); st.GetRunningPods() != 0 || len(st.GetNodes()) != 0 || st.GetAllocatedMilliGpus() != 0 {
		t.Errorf("stopped status %v", st)
	}
	if want := []workloadv1.WorkloadEventType{evSubmitted, evScheduled, evStarted, evSuspended}; !slices.Equal(eventTypes(got), want) {
		t.Errorf("events %v, want %v", eventTypes(got), want)
	}
}

// Evictions written while no controller runs are folded by the next one's
// listing, in key order, and each exactly once.
func TestController_EvictionsBeforeStart(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := e.create(t, "team-a", "train", training())
	for i := range 2 {
		key := fmt.Sprintf("%steam-a/train/%020d-%d", etcdstore.PrefixEvictions, time.Now().UnixNano(), i+1)
		ev := &workloadv1.WorkloadEvent{Type: evPreempted, Time: timestamppb.Now(), Message: "Reclaimed.",
			By: "projects/team-b/workloads/other", Rule: workloadv1.SchedulingRule_SCHEDULING_RULE_RECLAIM}
		if _, err := etcdstore.NewBatch(e.etcd.Client).Put(key, ev).Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// An eviction of a workload that no longer exists is dropped.
	orphan := etcdstore.PrefixEvictions + "team-a/gone/00000000000000000001-1"
	if _, err := etcdstore.NewBatch(e.etcd.Client).Put(orphan, &workloadv1.WorkloadEvent{Type: evPreempted}).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	stop := e.runController(t)
	got := e.await(t, w.GetName(), "two preemptions", func(w *workloadv1.Workload) bool { return w.GetStatus().GetPreemptionCount() == 2 })
	stop()
	e.runController(t)
	e.stable(t, got)
	want := []workloadv1.WorkloadEventType{evSubmitted, evPreempted, evPreempted}
	if !slices.Equal(eventTypes(got), want) {
		t.Errorf("events %v, want %v", eventTypes(got), want)
	}
	resp, err := e.etcd.Client.Get(t.Context(), etcdstore.PrefixEvictions, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d eviction keys left, want 0", resp.Count)
	}
}

// The workload's GPU idle time is the least of its running pods' reports:
// its GPUs are idle only while every pod's are.
func TestController_GpuIdleTimeIsLeastOfPods(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	spec := training()
	spec.Spec.Pods = 2
	w := e.create(t, "team-a", "train", spec)
	e.runController(t)
	e.bind(t, "n1", "team-a", "train", 0)
	e.bind(t, "n2", "team-a", "train", 1)
	idle := func(node string, pod int32, d time.Duration) {
		rep := &nodemanagerv1.ReportWorkloadStateRequest{Node: "nodes/" + node, Workload: w.GetName(), PodIndex: pod,
			State: workloadv1.PodState_POD_STATE_RUNNING, ObserveTime: timestamppb.Now(), GpuIdleTime: durationpb.New(d)}
		key := fmt.Sprintf("%s%s/team-a.train.%d", etcdstore.PrefixRuns, node, pod)
		if _, err := etcdstore.NewBatch(e.etcd.Client).Put(key, rep).Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	idle("n1", 0, 90*time.Second)
	idle("n2", 1, 30*time.Second)
	e.await(t, w.GetName(), "idle 30s", func(w *workloadv1.Workload) bool {
		return w.GetStatus().GetGpuIdleTime().AsDuration() == 30*time.Second
	})
	idle("n2", 1, 0)
	got := e.await(t, w.GetName(), "idle reset", func(w *workloadv1.Workload) bool {
		return w.GetStatus().GetGpuIdleTime() != nil && w.GetStatus().GetGpuIdleTime().AsDuration() == 0
	})
	if d := got.GetStatus().GetPods()[0].GetGpuIdleTime().AsDuration(); d != 90*time.Second {
		t.Errorf("pod 0 idle %v, want 90s", d)
	}
}

// TestController_SkipsUndecodable: a garbled workload, binding and run
// report are skipped (counted); every other workload is still folded.
func TestController_SkipsUndecodable(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := e.create(t, "team-a", "train", training())
	for _, key := range []string{etcdstore.PrefixWorkloads + "team-a/garbled", bindingKey("n1", "team-a", "garbled", 0)} {
		if _, err := e.etcd.Client.Put(t.Context(), key, "\xff\xff"); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	e.runControllerWith(t, &fixedClock{}, workload.WithRegisterer(reg))
	e.bindRunning(t, "n1", "team-a", "train", 0)
	e.await(t, w.GetName(), "running despite the garbled values", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	// A garbled report of the bound pod (newer than its binding: it counts).
	if _, err := e.etcd.Client.Put(t.Context(), fmt.Sprintf("%sn1/team-a.train.0", etcdstore.PrefixRuns), "\xff"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := testutil.GatherAndCount(reg, "runway_workload_controller_undecodable_values_total")
		if err != nil {
			t.Fatal(err)
		}
		if n >= 2 { // the workloads and runs prefixes (at least)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("undecodable values counted under %d prefixes, want the workloads' and the runs'", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestController_FillsPlacement: status.node_pool is the bound nodes' pool
// (as the node manager recorded it), and the allocated CPU and memory are
// the spec's per bound pod; all are cleared when the pods go.
func TestController_FillsPlacement(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	spec := training()
	spec.Spec.Pods, spec.Spec.MilliCpu, spec.Spec.MemoryBytes = 2, 1500, 2<<30
	w := e.create(t, "team-a", "train", spec)
	for _, n := range []string{"n1", "n2"} {
		node := &nodemanagerv1.Node{Name: "nodes/" + n, NodePool: "nodepools/a100"}
		if _, err := etcdstore.NewBatch(e.etcd.Client).Put(etcdstore.PrefixNodes+n, node).Commit(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	e.runController(t)
	e.bindRunning(t, "n1", "team-a", "train", 0)
	e.bindRunning(t, "n2", "team-a", "train", 1)
	got := e.await(t, w.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	if st := got.GetStatus(); st.GetNodePool() != "nodepools/a100" || st.GetAllocatedMilliCpu() != 3000 || st.GetAllocatedMemoryBytes() != 4<<30 {
		t.Errorf("node pool %q, CPU %d, memory %d; want nodepools/a100, 3000, 4 GiB", st.GetNodePool(), st.GetAllocatedMilliCpu(), st.GetAllocatedMemoryBytes())
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := e.etcd.Client.Delete(t.Context(), bindingKey(n, "team-a", "train", int32(n[1]-'1'))); err != nil {
			t.Fatal(err)
		}
	}
	got = e.await(t, w.GetName(), "released", func(w *workloadv1.Workload) bool { return w.GetStatus().GetRunningPods() == 0 })
	if st := got.GetStatus(); st.GetNodePool() != "" || st.GetAllocatedMilliCpu() != 0 || st.GetAllocatedMemoryBytes() != 0 {
		t.Errorf("after release: node pool %q, CPU %d, memory %d; want none", st.GetNodePool(), st.GetAllocatedMilliCpu(), st.GetAllocatedMemoryBytes())
	}
}

// etcdRanges is how many range reads the embedded etcd (in this process)
// has served, from its own counter.
func etcdRanges(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_mvcc_range_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("etcd_mvcc_range_total not found")
	return 0
}

// TestController_WorkFollowsChanges: a burst of bindings is folded from the
// watch-fed model without listing etcd, and the limits sweep reads nothing
// (none of these running workloads has limits).
func TestController_WorkFollowsChanges(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	const n = 30
	for i := range n {
		e.create(t, "team-a", fmt.Sprintf("w%02d", i), training())
	}
	e.runControllerWith(t, &fixedClock{}, workload.WithLimitCheckInterval(10*time.Millisecond))
	// Wait for the controller's first pass (its load) through a watch, which
	// reads nothing.
	time.Sleep(200 * time.Millisecond)
	before := etcdRanges(t)
	running := e.etcd.Client.Watch(t.Context(), etcdstore.PrefixWorkloads, clientv3.WithPrefix())
	b := etcdstore.NewBatch(e.etcd.Client)
	for i := range n {
		id := fmt.Sprintf("w%02d", i)
		b.Put(bindingKey("n1", "team-a", id, 0), &workloadv1.PodStatus{Index: 0, Node: "nodes/n1", FractionMilli: 1000,
			DeviceIndexes: []int32{int32(i % 8)}, State: workloadv1.PodState_POD_STATE_BOUND})
	}
	if _, err := b.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	timeout := time.After(10 * time.Second)
	for len(seen) < n {
		select {
		case resp := <-running:
			for _, ev := range resp.Events {
				seen[string(ev.Kv.Key)] = true
			}
		case <-timeout:
			t.Fatalf("%d of %d workloads folded", len(seen), n)
		}
	}
	time.Sleep(100 * time.Millisecond) // ten limit sweeps
	// etcd counts the comparison of each conditional write as a range:
	// one per workload written, and nothing else (no listing per burst or
	// per sweep).
	if d := etcdRanges(t) - before; d > n {
		t.Errorf("%v range reads to fold a burst of %d bindings and sweep limits, want at most %d (one per write's condition)", d, n, n)
	}
}

// TestController_CollectsRuns: a run report that no longer counts (its
// binding is gone) is deleted once folded; so are a deleted workload's.
func TestController_CollectsRuns(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := e.create(t, "team-a", "job", training())
	e.runController(t)
	e.bind(t, "n1", "team-a", "job", 0)
	e.report(t, "n1", "team-a", "job", 0, workloadv1.PodState_POD_STATE_SUCCEEDED, 0)
	e.await(t, w.GetName(), "completed", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED))
	runs := func() int64 {
		resp, err := e.etcd.Client.Get(t.Context(), etcdstore.PrefixRuns, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}
	if n := runs(); n != 1 {
		t.Fatalf("%d run reports while the pod is bound, want 1", n)
	}
	// The scheduler releases a finished workload's pods.
	if _, err := e.etcd.Client.Delete(t.Context(), bindingKey("n1", "team-a", "job", 0)); err != nil {
		t.Fatal(err)
	}
	waitCount(t, "the finished pod's report collected", runs)
	got, err := e.client.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: w.GetName()})
	if err != nil || got.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED {
		t.Fatalf("after the collection: %v, %v; want still COMPLETED", got.GetStatus().GetPhase(), err)
	}

	// A deleted workload's late report goes too.
	w2 := e.create(t, "team-a", "gone", training())
	if _, err := e.client.DeleteWorkload(t.Context(), &workloadv1.DeleteWorkloadRequest{Name: w2.GetName()}); err != nil {
		t.Fatal(err)
	}
	e.report(t, "n2", "team-a", "gone", 0, workloadv1.PodState_POD_STATE_STOPPED, 0)
	waitCount(t, "the deleted workload's report collected", runs)
}

func waitCount(t *testing.T, what string, count func() int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for count() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %d left", what, count())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
