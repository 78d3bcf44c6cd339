package scheduling_test

import (
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/scheduling"
	. "github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

// threeCycleLoop is the loop found before the settling rule: inside p1 a
// priority-75 j preempts the 0.1-GPU priority-50 v, taking p1 (deserved and
// fair share 0.5) to 1 GPU; p3 reclaims that GPU for p3-w; v, back at 0.1
// within p1's deserved quota, reclaims it from p3 by the per-victim deserved
// clause (p3 deserves 0); and j preempts v again. The other nodes hold d1's
// non-preemptible work.
func threeCycleLoop() *Cluster {
	return NewCluster().Node("n1", 1).Node("n2", 1).Node("n3", 2).
		Department("d0", 2, Limit(2), NoOverQuota()).
		Department("d1", 3).
		Project("p1", "d0", Deserved(0.5), Weight(0)).
		Project("p3", "d0", Deserved(0), Weight(1)).
		Project("p9", "d1", Deserved(3)).
		Workload(
			W("d1-a").Project("p9").GPU(1).Priority(build).On("n2"),
			W("d1-b").Project("p9").GPU(2).Priority(build).On("n3"),
			W("v").Project("p1").GPU(0.1).On("n1").At(time.Second),
			W("j").Project("p1").GPU(1).Priority(interactive).At(2*time.Second),
			W("p3-w").Project("p3").GPU(1).At(3*time.Second))
}

// TestSettlingRule: preempt may not take the project, or an ancestor, above
// max(deserved, fair share) where it was within it (SCHEDULING.md §3
// "Preempt").
func TestSettlingRule(t *testing.T) {
	runCycleCases(t, map[string]cycleCase{
		"the three-cycle loop: j may not preempt v to take p1 above its fair share": {
			cluster: threeCycleLoop(),
			wantWaiting: map[string]string{
				"j":    "it would take project p1 above its quota and fair share (0.5) unless the lower-priority workloads it evicts free 0.6 GPU",
				"p3-w": "",
			},
		},
		"a preemption that keeps the project within its fair share is allowed": {
			cluster: NewCluster().Node("n1", 1).
				Project("p", "", Deserved(1)).
				Workload(
					W("v").Project("p").GPU(1).On("n1"),
					W("j").Project("p").GPU(1).Priority(interactive).At(time.Second)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantEvicted: []evicted{{"v", scheduling.RulePreempt, "j"}},
			wantWaiting: map[string]string{"v": "evicted (preempt)"},
		},
		"a project already above its fair share may preempt: the rule guards only the crossing": {
			// p holds 2 GPUs of a fair share of 1 (q asks nothing); j swaps
			// one of them for itself.
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(1)).
				Workload(
					W("v1").Project("p").GPU(1).On("n1"),
					W("v2").Project("p").GPU(1).On("n1").At(time.Second),
					W("j").Project("p").GPU(1).Priority(interactive).At(2*time.Second)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantEvicted: []evicted{{"v2", scheduling.RulePreempt, "j"}},
			wantWaiting: map[string]string{"v2": "evicted (preempt)"},
		},
		"more victims when the fewest would cross the fair share": {
			// Evicting the 0.5 on n1 makes room but leaves p at 0.5 + 1 of a
			// fair share of 1; evicting the 1-GPU v on n2 keeps p at 1.
			cluster: NewCluster().Node("n1", 1).Node("n2", 1).
				Project("p", "", Deserved(1.5), Weight(0)).
				Workload(
					W("half").Project("p").GPU(0.5).On("n1"),
					W("v").Project("p").GPU(1).On("n2").At(time.Second),
					W("j").Project("p").GPU(1).Priority(interactive).At(2*time.Second)),
			wantBound:   map[string][]string{"j": {"n2"}},
			wantEvicted: []evicted{{"v", scheduling.RulePreempt, "j"}},
			wantWaiting: map[string]string{"v": "evicted (preempt)"},
		},
	})
}

// TestThreeCycleLoopSettles plays the loop's cluster: the first plan is
// empty, so a second cycle on its state evicts nothing either.
func TestThreeCycleLoopSettles(t *testing.T) {
	s := threeCycleLoop().State()
	plans := RunUntilStable(s, scheduling.DefaultConfig())
	if len(plans) != 1 {
		t.Fatalf("%d cycles to settle, want 1 (an empty first plan); the plans:\n%+v", len(plans), plans)
	}
}

// roomTakenAgain: j of p reclaims v's GPU and CPU from q (above its fair
// share of GPUs, which j asks for); k of p, of a higher priority, asks CPU
// only for its next pod, so it cannot reclaim v (q owes no CPU), but it could
// preempt j once j runs. Placing j only for k to take its room would evict v
// for nothing, and a cycle that kept j would see k preempt it in the next.
func roomTakenAgain() *Cluster {
	return NewCluster().Node("n1", 2, Cores(8)).
		Project("p", "", Deserved(2)).
		Project("q", "", Deserved(0), Weight(0)).
		Workload(
			W("v").Project("q").GPU(1).CPU(4).On("n1"),
			W("k").Project("p").CPU(4).Pods(2).MinPods(1).Priority(interactive).On("n1").At(time.Second),
			W("j").Project("p").GPU(1).CPU(4).At(2*time.Second))
}

// TestRoomTakenAgain: a search that would take the room this cycle's
// evictions made for a workload makes the cycle start over without that
// decision (settle.go, "Room taken again"): j waits, nothing is evicted, and
// the next cycle has nothing to do either.
func TestRoomTakenAgain(t *testing.T) {
	runCycleCases(t, map[string]cycleCase{
		"j does not reclaim v when k would take its room": {
			cluster: roomTakenAgain(),
			wantWaiting: map[string]string{
				"j": "would be taken again in this cycle",
				"k": "",
			},
		},
	})
	plans := RunUntilStable(roomTakenAgain().State(), scheduling.DefaultConfig())
	if len(plans) != 1 {
		t.Fatalf("%d cycles to settle, want 1 (an empty first plan); the plans:\n%+v", len(plans), plans)
	}
}
