package workload_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// A workspace rule with limits of its own for preemptible workspaces: the
// interactive-preemptible workspace is held to them, the build one to the
// general ones, and the controller stops each at its own limit.
func TestWorkspaceLimits_ByPreemptibility(t *testing.T) {
	e, clk := limited(t, &quotav1.SchedulingRules{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE,
		TimeLimit: durationpb.New(2 * time.Hour), IdleGpuLimit: durationpb.New(time.Hour),
		PreemptibleTimeLimit: durationpb.New(30 * time.Minute), PreemptibleIdleGpuLimit: durationpb.New(10 * time.Minute)})
	fixed := e.create(t, "team-a", "fixed", workspaceOf("build", nil))
	over := e.create(t, "team-a", "over", workspaceOf("interactive-preemptible", nil))
	if l := fixed.GetLimits(); l.GetTimeLimit().AsDuration() != 2*time.Hour || l.GetIdleGpuLimit().AsDuration() != time.Hour {
		t.Fatalf("non-preemptible workspace's limits %v, want 2h and 1h", l)
	}
	if l := over.GetLimits(); l.GetTimeLimit().AsDuration() != 30*time.Minute || l.GetIdleGpuLimit().AsDuration() != 10*time.Minute {
		t.Fatalf("preemptible workspace's limits %v, want 30m and 10m", l)
	}

	e.bindRunning(t, "n1", "team-a", "fixed", 0)
	e.bindRunning(t, "n2", "team-a", "over", 0)
	e.await(t, fixed.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	e.await(t, over.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING))
	clk.advance(30 * time.Minute)
	got := e.await(t, over.GetName(), "the preemptible one stopped at 30m", suspended)
	if r := got.GetStatus().GetStopReason(); !strings.Contains(r, "time limit") {
		t.Errorf("stop reason %q, want the time limit", r)
	}
	e.untouched(t, fixed.GetName())
	clk.advance(90 * time.Minute)
	e.await(t, fixed.GetName(), "the non-preemptible one stopped at 2h", suspended)
}

// Without preemptible limits both kinds of workspace get the general ones.
func TestWorkspaceLimits_PreemptibleUnsetMeansTheGeneralOnes(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research"}, &quotav1.SchedulingRules{
		WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, TimeLimit: durationpb.New(time.Hour)})
	for _, prio := range []string{"build", "interactive-preemptible"} {
		if l := e.create(t, "team-a", prio, workspaceOf(prio, nil)).GetLimits(); l.GetTimeLimit().AsDuration() != time.Hour {
			t.Fatalf("%s workspace's limits %v, want 1h", prio, l)
		}
	}
}
