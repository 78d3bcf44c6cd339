package workload_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/workload"
)

// virtualClock is a clock the test moves by hand; the controller checks
// limits against it (on a short real-time tick).
type virtualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *virtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *virtualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const tick = 10 * time.Millisecond

// limited starts a service and a controller on one virtual clock, with
// project team-a (department research) under rules.
func limited(t *testing.T, rules ...*quotav1.SchedulingRules) (*env, *virtualClock) {
	clk := &virtualClock{now: t0}
	e := startWithClock(t, clk)
	e.addOrg(t, map[string]string{"team-a": "research"}, rules...)
	e.runControllerWith(t, clk, workload.WithLimitCheckInterval(tick))
	return e, clk
}

// evict plays the scheduler's eviction: the binding deleted and a PREEMPTED
// event written in one transaction.
func (e *env) evict(t *testing.T, node, project, id string) {
	t.Helper()
	key := fmt.Sprintf("%s%s/%s/%020d-1", etcdstore.PrefixEvictions, project, id, time.Now().UnixNano())
	ev := &workloadv1.WorkloadEvent{Type: evPreempted, Message: "Reclaimed.", Rule: workloadv1.SchedulingRule_SCHEDULING_RULE_RECLAIM}
	if _, err := etcdstore.NewBatch(e.etcd.Client).Delete(bindingKey(node, project, id, 0)).Put(key, ev).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// release plays the scheduler releasing a suspended workload's pod.
func (e *env) release(t *testing.T, node, project, id string) {
	t.Helper()
	if _, err := e.etcd.Client.Delete(t.Context(), bindingKey(node, project, id, 0)); err != nil {
		t.Fatal(err)
	}
}

// idleReport writes pod 0's run report as the node agent does: RUNNING with
// the GPU idle time it measured.
func (e *env) idleReport(t *testing.T, node, project, id string, idle time.Duration) {
	t.Helper()
	rep := &nodemanagerv1.ReportWorkloadStateRequest{Node: "nodes/" + node, Workload: workload.WorkloadName(project, id),
		State: workloadv1.PodState_POD_STATE_RUNNING, ObserveTime: timestamppb.Now(), GpuIdleTime: durationpb.New(idle)}
	key := fmt.Sprintf("%s%s/%s.%s.0", etcdstore.PrefixRuns, node, project, id)
	if _, err := etcdstore.NewBatch(e.etcd.Client).Put(key, rep).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// untouched waits several limit checks and fails if w was stopped.
func (e *env) untouched(t *testing.T, name string) *workloadv1.Workload {
	t.Helper()
	time.Sleep(20 * tick)
	w, err := e.client.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if w.GetSpec().GetSuspended() || w.GetStatus().GetStopReason() != "" {
		t.Fatalf("%s was stopped: events %v, reason %q", name, eventTypes(w), w.GetStatus().GetStopReason())
	}
	return w
}

func suspended(w *workloadv1.Workload) bool { return w.GetSpec().GetSuspended() }

func TestTimeLimit_PreemptedHalfWayResumesWithItsRemainingTime(t *testing.T) {
	e, clk := limited(t, &quotav1.SchedulingRules{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		TimeLimit: durationpb.New(time.Hour)})
	w := e.create(t, "team-a", "train", training())
	if l := w.GetLimits(); l.GetTimeLimit().AsDuration() != time.Hour || l.GetSource() != "projects/team-a" {
		t.Fatalf("limits %v, want the project's 1h time limit copied", l)
	}

	e.bindRunning(t, "n1", "team-a", "train", 0)
	e.await(t, w.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	clk.advance(30 * time.Minute)
	e.evict(t, "n1", "team-a", "train")
	got := e.await(t, w.GetName(), "preempted", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING))
	if rt := got.GetStatus().GetRunningTime().AsDuration(); rt != 30*time.Minute {
		t.Errorf("running time after the first run %v, want 30m", rt)
	}

	clk.advance(2 * time.Hour) // pending time does not count
	e.untouched(t, w.GetName())
	e.bindRunning(t, "n2", "team-a", "train", 0)
	e.await(t, w.GetName(), "running again", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	clk.advance(29 * time.Minute)
	e.untouched(t, w.GetName())

	clk.advance(time.Minute) // 30m + 30m: the limit
	got = e.await(t, w.GetName(), "stopped by the limit", suspended)
	last := got.GetStatus().GetEvents()[len(got.GetStatus().GetEvents())-1]
	if last.GetType() != workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_LIMIT_REACHED || !strings.Contains(last.GetMessage(), "time limit") {
		t.Errorf("last event %v, want LIMIT_REACHED for the time limit", last)
	}
	e.release(t, "n2", "team-a", "train")
	got = e.await(t, w.GetName(), "stopped", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED))
	if r := got.GetStatus().GetStopReason(); !strings.Contains(r, "time limit") || !strings.Contains(r, "projects/team-a") {
		t.Errorf("stop reason %q, want the time limit and its source", r)
	}
	if rt := got.GetStatus().GetRunningTime().AsDuration(); rt != time.Hour {
		t.Errorf("running time %v, want 1h", rt)
	}
}

// Rules set after a submission do not apply to it.
func TestTimeLimit_OnlyForWorkloadsSubmittedAfterTheRule(t *testing.T) {
	e, clk := limited(t)
	w := e.create(t, "team-a", "before", training())
	it, err := e.projects.Get(t.Context(), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	it.Msg.SchedulingRules = []*quotav1.SchedulingRules{{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, TimeLimit: durationpb.New(time.Minute)}}
	if _, err := e.projects.Update(t.Context(), "team-a", it.Msg, ""); err != nil {
		t.Fatal(err)
	}
	after := e.create(t, "team-a", "after", training())
	e.bindRunning(t, "n1", "team-a", "before", 0)
	e.bindRunning(t, "n2", "team-a", "after", 0)
	e.await(t, w.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	e.await(t, after.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	clk.advance(time.Hour)
	e.await(t, after.GetName(), "the later one stopped", suspended)
	e.untouched(t, w.GetName())
}

func TestIdleGPULimit_IdleStoppedBusyNot(t *testing.T) {
	e, _ := limited(t, &quotav1.SchedulingRules{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		IdleGpuLimit: durationpb.New(10 * time.Minute)})
	idle := e.create(t, "team-a", "idle", training())
	busy := e.create(t, "team-a", "busy", training())
	e.bind(t, "n1", "team-a", "idle", 0)
	e.bind(t, "n2", "team-a", "busy", 0)
	e.idleReport(t, "n1", "team-a", "idle", 5*time.Minute)
	e.idleReport(t, "n2", "team-a", "busy", 0)
	e.await(t, idle.GetName(), "idle 5m", func(w *workloadv1.Workload) bool {
		return w.GetStatus().GetGpuIdleTime().AsDuration() == 5*time.Minute
	})
	e.untouched(t, idle.GetName())

	e.idleReport(t, "n1", "team-a", "idle", 10*time.Minute)
	e.idleReport(t, "n2", "team-a", "busy", 0) // busy: any activity resets its idle time
	got := e.await(t, idle.GetName(), "idle stopped", suspended)
	e.release(t, "n1", "team-a", "idle")
	got = e.await(t, idle.GetName(), "stopped", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED))
	if r := got.GetStatus().GetStopReason(); !strings.Contains(r, "idle-GPU limit") {
		t.Errorf("stop reason %q, want the idle-GPU limit", r)
	}
	if w := e.untouched(t, busy.GetName()); w.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING {
		t.Errorf("busy workload %v, want RUNNING", w.GetStatus().GetPhase())
	}
}

// With preempt_when_idle a preemptible workload goes back to PENDING; a
// non-preemptible one is stopped all the same.
func TestIdleGPULimit_PreemptWhenIdle(t *testing.T) {
	rule := func(typ workloadv1.WorkloadType) *quotav1.SchedulingRules {
		return &quotav1.SchedulingRules{WorkloadType: typ, IdleGpuLimit: durationpb.New(10 * time.Minute), PreemptWhenIdle: true}
	}
	e, _ := limited(t, rule(workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING), rule(workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE))
	train := e.create(t, "team-a", "train", training()) // priority train: preemptible
	ws := training()
	ws.Type = workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE // priority build: not preemptible
	nb := e.create(t, "team-a", "nb", ws)
	e.bind(t, "n1", "team-a", "train", 0)
	e.bind(t, "n2", "team-a", "nb", 0)
	e.idleReport(t, "n1", "team-a", "train", 15*time.Minute)
	e.idleReport(t, "n2", "team-a", "nb", 15*time.Minute)

	e.await(t, train.GetName(), "train being preempted", suspended)
	e.await(t, nb.GetName(), "workspace being stopped", suspended)
	e.release(t, "n1", "team-a", "train")
	e.release(t, "n2", "team-a", "nb")
	got := e.await(t, train.GetName(), "train pending", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING))
	if st := got.GetStatus(); got.GetSpec().GetSuspended() || st.GetPreemptionCount() != 1 || st.GetRequeueOnRelease() || st.GetStopReason() != "" {
		t.Errorf("train after idle preemption: suspended %v, status %v", got.GetSpec().GetSuspended(), st)
	}
	got = e.await(t, nb.GetName(), "workspace stopped", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED))
	if !strings.Contains(got.GetStatus().GetStopReason(), "idle-GPU limit") {
		t.Errorf("workspace stop reason %q", got.GetStatus().GetStopReason())
	}
	// Placed again, it starts with fresh pods and a fresh idle time.
	e.bindRunning(t, "n3", "team-a", "train", 0)
	e.await(t, train.GetName(), "train running again", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	e.untouched(t, train.GetName())
}

// The owner suspending a workload the controller is preempting keeps it
// STOPPED; resuming one keeps it running.
func TestIdleGPULimit_OwnerWinsOverRequeue(t *testing.T) {
	e, _ := limited(t, &quotav1.SchedulingRules{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		IdleGpuLimit: durationpb.New(10 * time.Minute), PreemptWhenIdle: true})
	w := e.create(t, "team-a", "train", training())
	e.bind(t, "n1", "team-a", "train", 0)
	e.idleReport(t, "n1", "team-a", "train", 15*time.Minute)
	e.await(t, w.GetName(), "being preempted", func(w *workloadv1.Workload) bool { return w.GetStatus().GetRequeueOnRelease() })
	if _, err := e.client.SuspendWorkload(t.Context(), &workloadv1.SuspendWorkloadRequest{Name: w.GetName()}); err != nil {
		t.Fatal(err)
	}
	e.release(t, "n1", "team-a", "train")
	got := e.await(t, w.GetName(), "stopped", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED))
	if got.GetStatus().GetRequeueOnRelease() || got.GetStatus().GetPreemptionCount() != 0 {
		t.Errorf("status %v, want STOPPED without requeue or preemption", got.GetStatus())
	}
}
