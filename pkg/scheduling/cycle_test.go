package scheduling_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
	"github.com/runwayhq/runway/pkg/scheduling"
	. "github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

var (
	train       = cluster.PriorityTrain
	interactive = cluster.PriorityInteractivePreemptible
	build       = cluster.PriorityBuild
	inference   = cluster.PriorityInference
)

// evicted is an eviction as the tables state it.
type evicted struct {
	Workload string
	Rule     scheduling.Rule
	For      string
}

// outcome is a plan in the tables' terms.
type outcome struct {
	bound   map[string][]string // workload → the node of each pod bound, in pod order
	devices map[string][][]int  // workload → the devices of each pod bound
	evicted []evicted           // sorted by workload
	waiting map[string][]string // workload → its reasons
}

func outcomeOf(t *testing.T, plan scheduling.Plan) outcome {
	t.Helper()
	o := outcome{bound: map[string][]string{}, devices: map[string][][]int{}, waiting: map[string][]string{}}
	for _, b := range plan.Bindings {
		o.bound[b.Workload] = append(o.bound[b.Workload], b.Node)
		o.devices[b.Workload] = append(o.devices[b.Workload], b.Devices)
	}
	for _, e := range plan.Evictions {
		if e.Reason == "" {
			t.Errorf("eviction of %s (%s) has no reason", e.Workload, e.Rule)
		}
		o.evicted = append(o.evicted, evicted{e.Workload, e.Rule, e.For})
	}
	slices.SortFunc(o.evicted, func(a, b evicted) int { return strings.Compare(a.Workload, b.Workload) })
	for _, w := range plan.Waiting {
		if _, dup := o.waiting[w.Workload]; dup {
			t.Errorf("workload %s is listed twice in Waiting", w.Workload)
		}
		o.waiting[w.Workload] = scheduling.Texts(w.Reasons)
	}
	return o
}

// cycleCase is one cycle on a declared cluster and the whole plan it must
// give.
type cycleCase struct {
	cluster *Cluster
	spread  bool
	now     time.Duration
	// wantBound lists, per workload, the node each bound pod goes to;
	// wantDevices, for the workloads it names, their devices.
	wantBound   map[string][]string
	wantDevices map[string][][]int
	wantEvicted []evicted
	// wantWaiting names every waiting workload with a phrase one of its
	// reasons contains ("" for any reason).
	wantWaiting map[string]string
}

// runCycleCases runs each case's cycle, compares the plan and applies it.
func runCycleCases(t *testing.T, tests map[string]cycleCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := tc.cluster.State()
			cfg := scheduling.DefaultConfig()
			cfg.Now = tc.now
			if tc.spread {
				cfg.Placement = placement.Spread
			}
			plan := scheduling.Cycle(s, cfg)
			got := outcomeOf(t, plan)

			if diff := cmp.Diff(tc.wantBound, got.bound, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("bound pods (-want +got):\n%s", diff)
			}
			for w, want := range tc.wantDevices {
				if diff := cmp.Diff(want, got.devices[w]); diff != "" {
					t.Errorf("devices of %s (-want +got):\n%s", w, diff)
				}
			}
			if diff := cmp.Diff(tc.wantEvicted, got.evicted, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("evictions (-want +got):\n%s", diff)
			}
			for w, phrase := range tc.wantWaiting {
				reasons, ok := got.waiting[w]
				switch {
				case !ok:
					t.Errorf("%s is not waiting; want a reason containing %q", w, phrase)
				case !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, phrase) }):
					t.Errorf("%s's reasons %q: none contains %q", w, reasons, phrase)
				}
			}
			for w, reasons := range got.waiting {
				if _, ok := tc.wantWaiting[w]; !ok {
					t.Errorf("%s waits unexpectedly: %q", w, reasons)
				}
			}
			if err := scheduling.Apply(s, plan, cfg.Now); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			for _, problem := range invariants(s) {
				t.Errorf("after Apply: %s", problem)
			}
		})
	}
}

// threeNodes has 1, 3 and 4 GPUs free on n1, n2 and n3, and a pending 1-GPU j.
func threeNodes() *Cluster {
	return NewCluster().Node("n1", 4).Node("n2", 4).Node("n3", 4).
		Project("p", "", Deserved(12)).
		Workload(
			W("r3").Project("p").GPU(3).On("n1"),
			W("r1").Project("p").GPU(1).On("n2"),
			W("j").Project("p").GPU(1))
}

// gangBelowMinimum has gang g holding 2 of its 3 pods since 0 with no room
// for the third on its node type, and j of another project whose reclaim
// search tries evicting g but cannot make room: 4 GPUs would be free in all,
// 2 per node (the other node holds a non-preemptible workload).
func gangBelowMinimum() *Cluster {
	return NewCluster().Node("n1", 2, Type("a")).Node("n2", 4, Type("b")).
		Project("p", "").
		Project("q", "", Deserved(4)).
		Project("r", "", Deserved(2)).
		Workload(
			W("g").Project("p").GPU(1).Pods(3).NodeType("a").On("n1", "n1"),
			W("f").Project("r").GPU(2).Priority(build).On("n2"),
			W("j").Project("q").GPU(4))
}

// A cycle must leave the gang-minimum clock alone: a victim search that
// tries evicting the gang and rolls back is not the gang dropping below its
// minimum again. (Bug: the tentative eviction reset BelowMinSince to -1 and
// Apply then restarted the clock at the cycle's time, so with a cycle every
// 30 s such a gang was never evicted.)
// TestCycle runs one cycle on a declared cluster and checks the whole plan:
// which pods are bound where, what is evicted under which rule and for
// whom, and which workloads wait with which reason.
func TestCycle(t *testing.T) {
	runCycleCases(t, map[string]cycleCase{
		// §3 "Which victims": compare whole sets, never devices one at a time.
		"an 8-GPU node holding victims of 1, 3 and 4 GPUs gives a 4-GPU J the 4-GPU victim, not 1 + 3": {
			cluster: NewCluster().Node("n1", 8).
				Project("a", "", Deserved(4)).
				Project("b", "", Deserved(4)).
				Workload(
					W("v1").Project("b").GPU(1).At(time.Minute).On("n1"),
					W("v3").Project("b").GPU(3).At(time.Minute).On("n1"),
					W("v4").Project("b").GPU(4).On("n1"),
					W("j").Project("a").GPU(4).At(2*time.Minute)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantDevices: map[string][][]int{"j": {{4, 5, 6, 7}}},
			wantEvicted: []evicted{{"v4", scheduling.RuleReclaim, "j"}},
			wantWaiting: map[string]string{"v4": "evicted (reclaim)"},
		},
		"a device shared by two 0.5 workloads costs two workloads, so the 1-GPU victim alone on another device is taken": {
			cluster: NewCluster().Node("n1", 2).
				Project("a", "", Deserved(1)).
				Project("b", "", Deserved(1)).
				Workload(
					W("h1").Project("b").GPU(0.5).At(time.Minute).OnDevices("n1", 0),
					W("h2").Project("b").GPU(0.5).At(time.Minute).OnDevices("n1", 0),
					W("v").Project("b").GPU(1).OnDevices("n1", 1),
					W("j").Project("a").GPU(1).At(2*time.Minute)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantDevices: map[string][][]int{"j": {{1}}},
			wantEvicted: []evicted{{"v", scheduling.RuleReclaim, "j"}},
			wantWaiting: map[string]string{"v": "evicted (reclaim)"},
		},
		"the quick start: team-b's b2 reclaims the 1-GPU a1, not the newer 2-GPU a2": {
			cluster: NewCluster().Node("node-1", 2).Node("node-2", 2).
				Project("team-a", "", Deserved(2)).
				Project("team-b", "", Deserved(2)).
				Workload(
					W("a1").Project("team-a").GPU(1).On("node-1"),
					W("a2").Project("team-a").GPU(2).At(1*time.Second).On("node-2"),
					W("b1").Project("team-b").GPU(1).At(2*time.Second).On("node-1"),
					W("b2").Project("team-b").GPU(1).At(3*time.Second)),
			wantBound:   map[string][]string{"b2": {"node-1"}},
			wantEvicted: []evicted{{"a1", scheduling.RuleReclaim, "b2"}},
			wantWaiting: map[string]string{"a1": "evicted (reclaim)"},
		},
		"reclaim between departments takes the newest victims of the department above its fair share": {
			cluster: NewCluster().Node("n1", 4).
				Department("A", 2).Department("B", 2).
				Project("a1", "A").Project("b1", "B").
				Workload(
					W("b-1").Project("b1").GPU(1).At(1*time.Second).On("n1"),
					W("b-2").Project("b1").GPU(1).At(2*time.Second).On("n1"),
					W("b-3").Project("b1").GPU(1).At(3*time.Second).On("n1"),
					W("b-4").Project("b1").GPU(1).At(4*time.Second).On("n1"),
					W("j").Project("a1").GPU(2).At(5*time.Second)),
			wantBound: map[string][]string{"j": {"n1"}},
			wantEvicted: []evicted{
				{"b-3", scheduling.RuleReclaim, "j"},
				{"b-4", scheduling.RuleReclaim, "j"},
			},
			wantWaiting: map[string]string{"b-3": "evicted (reclaim)", "b-4": "evicted (reclaim)"},
		},
		"a project within its deserved quota reclaims from one above its deserved quota even at its fair share": {
			// b deserves 1 and its fair share is 2 (the GPU a leaves); it holds 2,
			// one per node, so a's 2-GPU J fits nowhere without a victim.
			cluster: NewCluster().Node("n1", 2).Node("n2", 2).
				Project("a", "", Deserved(2)).
				Project("b", "", Deserved(1)).
				Workload(
					W("b-1").Project("b").GPU(1).On("n1"),
					W("b-2").Project("b").GPU(1).At(time.Second).On("n2"),
					W("j").Project("a").GPU(2).At(2*time.Second)),
			// b-2, sent back, takes the GPU left on n1 in the same plan
			// (makeRoom's next round), as the next cycle would.
			wantBound:   map[string][]string{"j": {"n2"}, "b-2": {"n1"}},
			wantEvicted: []evicted{{"b-2", scheduling.RuleReclaim, "j"}},
		},
		"a project at its fair share cannot reclaim from one at its own": {
			cluster: NewCluster().Node("n1", 4).
				Project("a", "", Deserved(2)).
				Project("b", "", Deserved(2)).
				Workload(
					W("a-1").Project("a").GPU(2).On("n1"),
					W("b-1").Project("b").GPU(2).On("n1"),
					W("j").Project("b").GPU(1).At(time.Second)),
			wantWaiting: map[string]string{"j": "project b would hold 3 GPUs with it, above its fair share of 2; it cannot reclaim"},
		},

		// §3 "Preempt": inside one project, strictly lower priority only.
		"a higher priority J preempts a strictly lower one of its project, not one of its own priority": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(2)).
				Workload(
					W("t1").Project("p").GPU(1).On("n1"),
					W("i1").Project("p").GPU(1).Priority(interactive).At(time.Second).On("n1"),
					W("j").Project("p").GPU(1).Priority(interactive).At(2*time.Second)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantEvicted: []evicted{{"t1", scheduling.RulePreempt, "j"}},
			wantWaiting: map[string]string{"t1": "evicted (preempt)"},
		},
		"a J of the same priority preempts nothing": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(2)).
				Workload(
					W("t1").Project("p").GPU(1).On("n1"),
					W("t2").Project("p").GPU(1).On("n1"),
					W("j").Project("p").GPU(1).At(time.Second)),
			wantWaiting: map[string]string{"j": "needs 1 GPU on one node; the largest free block is 0 GPUs"},
		},
		"a non-preemptible J within deserved preempts the newest lower-priority workload": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(2)).
				Workload(
					W("i1").Project("p").GPU(1).Priority(interactive).On("n1"),
					W("i2").Project("p").GPU(1).Priority(interactive).At(time.Second).On("n1"),
					W("j").Project("p").GPU(1).Priority(build).At(2*time.Second)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantEvicted: []evicted{{"i2", scheduling.RulePreempt, "j"}},
			wantWaiting: map[string]string{"i2": "evicted (preempt)"},
		},
		"a running non-preemptible workload is never preempted, even for a higher priority": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(3)).
				Workload(
					W("b1").Project("p").GPU(1).Priority(build).On("n1"),
					W("b2").Project("p").GPU(1).Priority(build).On("n1"),
					W("j").Project("p").GPU(1).Priority(inference).At(time.Second)),
			wantWaiting: map[string]string{"j": "the largest free block is 0 GPUs"},
		},

		// §3 allocate's checks: non-preemptible work stays within deserved.
		"a non-preemptible workload never takes its project beyond deserved, even with idle GPUs": {
			cluster: NewCluster().Node("n1", 4).
				Project("p", "", Deserved(1)).
				Workload(
					W("b1").Project("p").GPU(1).Priority(build).On("n1"),
					W("j").Project("p").GPU(1).Priority(inference)),
			wantWaiting: map[string]string{"j": "non-preemptible workloads of project p would hold 2 GPUs, above its deserved quota of 1"},
		},
		"a non-preemptible workload never takes its department beyond deserved": {
			cluster: NewCluster().Node("n1", 4).
				Department("d", 1).
				Project("p1", "d", Deserved(1)).
				Project("p2", "d", Deserved(1)).
				Workload(
					W("b1").Project("p1").GPU(1).Priority(build).On("n1"),
					W("j").Project("p2").GPU(1).Priority(build)),
			wantWaiting: map[string]string{"j": "non-preemptible workloads of department d would hold 2 GPUs, above its deserved quota of 1"},
		},
		"preemption does not lift the deserved check for a non-preemptible J": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(1)).
				Workload(
					W("t1").Project("p").GPU(1).On("n1"),
					W("b1").Project("p").GPU(1).Priority(build).On("n1"),
					W("j").Project("p").GPU(1).Priority(inference).At(time.Second)),
			wantWaiting: map[string]string{"j": "non-preemptible workloads of project p would hold 2 GPUs, above its deserved quota of 1"},
		},
		"reclaim never evicts a non-preemptible workload: J waits rather than take it": {
			// b is below its (over-subscribed) fair share of 4, but a's only
			// preemptible workload frees 2 of the 4 GPUs J needs on one node.
			cluster: NewCluster().Node("n1", 4).
				Project("a", "", Deserved(2)).
				Project("b", "", Deserved(4)).
				Workload(
					W("ba").Project("a").GPU(2).Priority(build).On("n1"),
					W("ta").Project("a").GPU(2).On("n1"),
					W("j").Project("b").GPU(4).At(time.Second)),
			wantWaiting: map[string]string{"j": "reclaim: no set of victims"},
		},
		"reclaim takes the preemptible workload beside a non-preemptible one": {
			cluster: NewCluster().Node("n1", 4).
				Project("a", "", Deserved(2)).
				Project("b", "", Deserved(2)).
				Workload(
					W("ba").Project("a").GPU(2).Priority(build).On("n1"),
					W("ta").Project("a").GPU(2).On("n1"),
					W("j").Project("b").GPU(2).At(time.Second)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantEvicted: []evicted{{"ta", scheduling.RuleReclaim, "j"}},
			wantWaiting: map[string]string{"ta": "evicted (reclaim)"},
		},

		// Limits, with the numbers in the reason.
		"a project's limit blocks placement even with idle GPUs": {
			cluster: NewCluster().Node("n1", 4).
				Project("p", "", Deserved(1), Limit(2)).
				Workload(
					W("r1").Project("p").GPU(1).On("n1"),
					W("r2").Project("p").GPU(1).On("n1"),
					W("j").Project("p").GPU(1)),
			wantWaiting: map[string]string{"j": "project p would hold 3 GPUs, above its limit of 2"},
		},
		"a department's limit blocks its projects": {
			cluster: NewCluster().Node("n1", 4).
				Department("d", 0, Limit(2)).
				Project("p", "d").
				Workload(
					W("r1").Project("p").GPU(2).On("n1"),
					W("j").Project("p").GPU(1)),
			wantWaiting: map[string]string{"j": "department d would hold 3 GPUs, above its limit of 2"},
		},
		"over-quota off caps a project at its deserved quota": {
			cluster: NewCluster().Node("n1", 4).
				Project("p", "", Deserved(2), NoOverQuota()).
				Workload(
					W("r1").Project("p").GPU(2).On("n1"),
					W("j").Project("p").GPU(1)),
			wantWaiting: map[string]string{"j": "project p would hold 3 GPUs, above its quota (over-quota is off) of 2"},
		},
		"a CPU limit is checked like a GPU one": {
			cluster: NewCluster().Node("n1", 4).
				Project("p", "", LimitCPU(2)).
				Workload(
					W("r1").Project("p").CPU(2).On("n1"),
					W("j").Project("p").CPU(1)),
			wantWaiting: map[string]string{"j": "project p would hold 3 cores, above its limit of 2"},
		},

		// Placement failures, with the numbers.
		"a 4-GPU pod does not fit two nodes with 2 free GPUs each": {
			// Non-preemptible, r1 and r2 cannot move to consolidate the pool.
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).
				Project("p", "", Deserved(8)).
				Workload(
					W("r1").Project("p").GPU(2).Priority(build).On("n1"),
					W("r2").Project("p").GPU(2).Priority(build).On("n2"),
					W("j").Project("p").GPU(4)),
			wantWaiting: map[string]string{"j": "needs 4 GPUs on one node; the largest free block is 2"},
		},
		"a workload for a node type nobody has says so": {
			cluster: NewCluster().Node("n1", 4, Type("a100")).
				Project("p", "", Deserved(4)).
				Workload(W("j").Project("p").GPU(1).NodeType("h100")),
			wantWaiting: map[string]string{"j": "node pool default has no Ready node of type h100"},
		},

		// Gangs (§4): all together or not at all.
		"a gang of which only some pods fit places none": {
			cluster: NewCluster().Node("n1", 4).Node("n2", 1).
				Project("p", "", Deserved(5)).
				Workload(W("g").Project("p").GPU(2).Pods(3)),
			wantWaiting: map[string]string{"g": "needs 3 pods of 2 GPUs on one node; 2 fit"},
		},
		"a gang that fits is placed whole, across nodes": {
			cluster: NewCluster().Node("n1", 2).Node("n2", 2).
				Project("p", "", Deserved(4)).
				Workload(W("g").Project("p").GPU(1).Pods(4)),
			wantBound: map[string][]string{"g": {"n1", "n1", "n2", "n2"}},
		},
		"an elastic workload gets its minimum and then one pod at a time while room remains": {
			cluster: NewCluster().Node("n1", 3).
				Project("p", "", Deserved(3)).
				Workload(W("e").Project("p").GPU(1).Pods(5).MinPods(2)),
			wantBound: map[string][]string{"e": {"n1", "n1", "n1"}},
		},
		"a gang below its minimum for 59 s is kept": {
			cluster: NewCluster().Node("n1", 2).Node("n2", 2).
				Project("p", "", Deserved(2)).
				Project("q", "", Deserved(2)).
				Workload(
					W("g").Project("p").GPU(1).Pods(3).On("n1", "n1"),
					W("f").Project("q").GPU(2).On("n2")),
			now:         59 * time.Second,
			wantWaiting: map[string]string{"g": "needs 1 GPU on one node"},
		},
		"a gang below its minimum for 60 s is evicted whole": {
			cluster: NewCluster().Node("n1", 2).Node("n2", 2).
				Project("p", "", Deserved(2)).
				Project("q", "", Deserved(2)).
				Workload(
					W("g").Project("p").GPU(1).Pods(3).On("n1", "n1"),
					W("f").Project("q").GPU(2).On("n2")),
			now:         60 * time.Second,
			wantEvicted: []evicted{{"g", scheduling.RuleGangMinimum, ""}},
			wantWaiting: map[string]string{"g": "evicted (gang-minimum): held 2 of its minimum 3 pods for 1m0s"},
		},

		// Placement strategy (§5).
		"binpack puts a GPU on the fullest node that fits": {
			cluster:   threeNodes(),
			wantBound: map[string][]string{"j": {"n1"}},
		},
		"spread puts a GPU on the emptiest node": {
			cluster:   threeNodes(),
			spread:    true,
			wantBound: map[string][]string{"j": {"n3"}},
		},
		"equal nodes go by name under both strategies": {
			cluster: NewCluster().Node("n2", 4).Node("n1", 4).
				Project("p", "").Workload(W("j").Project("p").GPU(1)),
			wantBound: map[string][]string{"j": {"n1"}},
		},
		"equal nodes go by name under spread too": {
			cluster: NewCluster().Node("n2", 4).Node("n1", 4).
				Project("p", "").Workload(W("j").Project("p").GPU(1)),
			spread:    true,
			wantBound: map[string][]string{"j": {"n1"}},
		},
		"binpack puts a fraction on the fullest shared device it fits on": {
			cluster: NewCluster().Node("n1", 3).
				Project("p", "", Deserved(3)).
				Workload(
					W("s1").Project("p").GPU(0.25).OnDevices("n1", 0),
					W("s2").Project("p").GPU(0.5).OnDevices("n1", 1),
					W("j").Project("p").GPU(0.25)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantDevices: map[string][][]int{"j": {{1}}},
		},
		"binpack prefers a node with a shared device to a fuller node without one": {
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).
				Project("p", "", Deserved(8)).
				Workload(
					W("w3").Project("p").GPU(3).On("n1"),
					W("s").Project("p").GPU(0.5).OnDevices("n2", 2),
					W("j").Project("p").GPU(0.5)),
			wantBound:   map[string][]string{"j": {"n2"}},
			wantDevices: map[string][][]int{"j": {{2}}},
		},
		"spread puts a fraction on the emptiest shared device": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(2)).
				Workload(
					W("s1").Project("p").GPU(0.5).OnDevices("n1", 0),
					W("s2").Project("p").GPU(0.25).OnDevices("n1", 1),
					W("j").Project("p").GPU(0.25)),
			spread:      true,
			wantBound:   map[string][]string{"j": {"n1"}},
			wantDevices: map[string][][]int{"j": {{1}}},
		},
		"a whole GPU goes to an idle device, never a shared one": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(2)).
				Workload(
					W("s").Project("p").GPU(0.25).OnDevices("n1", 0),
					W("j").Project("p").GPU(1)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantDevices: map[string][][]int{"j": {{1}}},
		},
		"a GPU-memory slice takes its share of the device it lands on": {
			cluster: NewCluster().Node("n1", 1, DeviceMemoryGiB(40)).
				Project("p", "", Deserved(1)).
				Workload(
					W("m1").Project("p").GPUMemoryGiB(20).On("n1"),
					W("j").Project("p").GPUMemoryGiB(10)),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantDevices: map[string][][]int{"j": {{0}}},
		},
	})
}

func TestCycleKeepsGangMinimumClock(t *testing.T) {
	s := gangBelowMinimum().State()
	g := s.Workload("g")
	if g.BelowMinSince != 0 {
		t.Fatalf("as built, BelowMinSince = %v, want 0", g.BelowMinSince)
	}
	cfg := scheduling.DefaultConfig()
	cfg.Now = 30 * time.Second
	plan := scheduling.Cycle(s, cfg)
	if g.BelowMinSince != 0 {
		t.Errorf("after a cycle at 30s, BelowMinSince = %v, want 0", g.BelowMinSince)
	}
	if !plan.Empty() {
		t.Fatalf("cycle at 30s: want an empty plan, got %+v", plan)
	}
	if err := scheduling.Apply(s, plan, cfg.Now); err != nil {
		t.Fatal(err)
	}
	cfg.Now = 60 * time.Second
	got := outcomeOf(t, scheduling.Cycle(s, cfg))
	want := []evicted{{"g", scheduling.RuleGangMinimum, ""}}
	if diff := cmp.Diff(want, got.evicted); diff != "" {
		t.Errorf("cycle at 60s, evictions (-want +got):\n%s", diff)
	}
}

// A cycle must leave every node's pod list as it was: Node.Pods is in
// placement order. Known bug, in pkg/cluster (not ours to change here): a
// tentative eviction that is rolled back re-appends the pod at the end.
// Nothing decides on that order today (only SetReady's returned list
// follows it), so the property tests compare the lists as sets.
func TestCycleKeepsNodePodOrder(t *testing.T) {
	s := gangBelowMinimum().State()
	pods := func() []string {
		var out []string
		for _, ref := range s.Node("n1").Pods {
			out = append(out, fmt.Sprintf("%s/%d", ref.Workload.ID, ref.Pod))
		}
		return out
	}
	before := pods()
	scheduling.Cycle(s, scheduling.DefaultConfig())
	if diff := cmp.Diff(before, pods()); diff != "" {
		t.Errorf("n1's pods (-before +after):\n%s", diff)
	}
}

// Every eviction says who took the resources, under which rule, with the
// numbers as they were before the eviction.
func TestEvictionReasons(t *testing.T) {
	quickStart := func() *Cluster {
		return NewCluster().Node("node-1", 2).Node("node-2", 2).
			Project("team-a", "", Deserved(2)).
			Project("team-b", "", Deserved(2)).
			Workload(
				W("a1").Project("team-a").GPU(1).On("node-1"),
				W("a2").Project("team-a").GPU(2).At(1*time.Second).On("node-2"),
				W("b1").Project("team-b").GPU(1).At(2*time.Second).On("node-1"),
				W("b2").Project("team-b").GPU(1).At(3*time.Second))
	}
	tests := map[string]struct {
		cluster    *Cluster
		now        time.Duration
		wantReason map[string]string // evicted workload → its reason
	}{
		"reclaim names the reclaimer, what the victim's project held and its fair share": {
			cluster:    quickStart(),
			wantReason: map[string]string{"a1": "project team-b reclaimed 1 GPU: project team-a held 3 GPUs (deserved 2, fair share 2)"},
		},
		"two victims of one project: each sees the earlier one gone": {
			cluster: NewCluster().Node("n1", 4).
				Project("a", "", Deserved(2)).
				Project("b", "", Deserved(2)).
				Workload(
					W("b-1").Project("b").GPU(1).On("n1"),
					W("b-2").Project("b").GPU(1).On("n1"),
					W("b-3").Project("b").GPU(1).At(time.Second).On("n1"),
					W("b-4").Project("b").GPU(1).At(time.Second).On("n1"),
					W("j").Project("a").GPU(2).At(2*time.Second)),
			wantReason: map[string]string{
				"b-3": "project a reclaimed 1 GPU: project b held 4 GPUs (deserved 2, fair share 2)",
				"b-4": "project a reclaimed 1 GPU: project b held 3 GPUs (deserved 2, fair share 2)",
			},
		},
		"preemption names both priorities": {
			cluster: NewCluster().Node("n1", 1).
				Project("p", "", Deserved(1)).
				Workload(
					W("t1").Project("p").GPU(1).On("n1"),
					W("j").Project("p").GPU(1).Priority(interactive)),
			wantReason: map[string]string{"t1": "j (priority interactive-preemptible) of project p needed 1 GPU; t1 has priority train"},
		},
		"the gang minimum says how long": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "").
				Workload(W("g").Project("p").GPU(1).Pods(4).On("n1", "n1")),
			now:        time.Minute,
			wantReason: map[string]string{"g": "held 2 of its minimum 4 pods for 1m0s"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := scheduling.DefaultConfig()
			cfg.Now = tc.now
			got := map[string]string{}
			for _, e := range scheduling.Cycle(tc.cluster.State(), cfg).Evictions {
				got[e.Workload] = e.Reason
			}
			if diff := cmp.Diff(tc.wantReason, got); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}

// Two departments with no fair share (weight 0, nothing deserved) whose
// projects each deserve the one GPU: project fair shares are not scaled
// down to their department's, so each project passes the reclaim gate, the
// other department is "above its fair share of 0", and the after rule skips
// a sibling whose fair share is 0. Per SCHEDULING.md to the letter, a and b
// would take the GPU from each other every cycle, forever; Runway's after
// rule does not skip S when X's side has fair share 0 as well.
func TestReclaimDoesNotThrash(t *testing.T) {
	s := NewCluster().Node("n1", 1).
		Department("d0", 0, Weight(0)).Department("d1", 0, Weight(0)).
		Project("p0", "d0", Deserved(1)).Project("p1", "d1", Deserved(1)).
		Workload(W("a").Project("p0").GPU(1).On("n1"), W("b").Project("p1").GPU(1)).
		State()
	if plans := RunUntilStable(s, scheduling.DefaultConfig()); !Stable(plans) {
		t.Errorf("no stable state after %d cycles; the last two plans:\n%+v\n%+v", len(plans), plans[len(plans)-2], plans[len(plans)-1])
	}
}

// Each reason names the check it failed, the pool it ran in and, for quota
// checks, the queue: what clients branch on (PendingReason.check).
func TestReasonChecks(t *testing.T) {
	tests := map[string]struct {
		cluster  *Cluster
		phrase   string
		check    scheduling.Check
		queue    string
		workload string // the waiting workload ("j" when empty)
		// requested and available (milli-GPUs) and nodes, where the case
		// gives them (requested 0: not checked)
		requested, available int64
		nodes                int
	}{
		"limit": {
			cluster: NewCluster().Node("n1", 4).Project("p", "", Deserved(1), Limit(2)).
				Workload(W("r1").Project("p").GPU(2).On("n1"), W("j").Project("p").GPU(1)),
			phrase: "above its limit", check: scheduling.CheckLimit, queue: "projects/p", requested: 1000, available: 0,
		},
		"non-preemptible beyond deserved": {
			cluster: NewCluster().Node("n1", 4).Project("p", "", Deserved(1)).
				Workload(W("b1").Project("p").GPU(1).Priority(build).On("n1"), W("j").Project("p").GPU(1).Priority(build)),
			phrase: "above its deserved quota", check: scheduling.CheckNonPreemptibleDeserved, queue: "projects/p",
		},
		"node type": {
			cluster: NewCluster().Node("n1", 4, Type("a100")).Project("p", "", Deserved(4)).
				Workload(W("j").Project("p").GPU(1).NodeType("h100")),
			phrase: "no Ready node of type h100", check: scheduling.CheckNodeType,
		},
		"capacity": {
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).Project("p", "", Deserved(8)).
				Workload(W("r1").Project("p").GPU(2).Priority(build).On("n1"), W("r2").Project("p").GPU(2).Priority(build).On("n2"),
					W("j").Project("p").GPU(4)),
			phrase: "the largest free block is 2", check: scheduling.CheckCapacity, requested: 4000, available: 2000, nodes: 2,
		},
		"gang": {
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).Project("p", "", Deserved(8)).
				Workload(W("r1").Project("p").GPU(4).On("n1"), W("j").Project("p").GPU(4).Pods(2)),
			phrase: "needs 2 pods of 4 GPUs on one node; 1 fit", check: scheduling.CheckGang,
		},
		"reclaim gate": {
			cluster: NewCluster().Node("n1", 2).Project("a", "", Deserved(1)).Project("b", "", Deserved(1)).
				Workload(W("a1").Project("a").GPU(1).On("n1"), W("b1").Project("b").GPU(1).On("n1"), W("j").Project("a").GPU(1).At(time.Second)),
			phrase: "above its fair share", check: scheduling.CheckReclaim, queue: "projects/a", requested: 1000, available: 0,
		},
		"evicted by reclaim": {
			cluster: NewCluster().Node("n1", 2).Project("a", "", Deserved(2)).Project("b", "", Deserved(0)).
				Workload(W("b1").Project("b").GPU(2).On("n1"), W("j").Project("a").GPU(2).At(time.Second)),
			phrase: "evicted (reclaim)", check: scheduling.CheckReclaim, workload: "b1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			plan := scheduling.Cycle(tc.cluster.State(), scheduling.DefaultConfig())
			want := tc.workload
			if want == "" {
				want = "j"
			}
			for _, w := range plan.Waiting {
				if w.Workload != want {
					continue
				}
				for _, r := range w.Reasons {
					if strings.Contains(r.Text, tc.phrase) {
						if r.Check != tc.check || r.Pool != "default" || r.Queue != tc.queue {
							t.Errorf("reason %q: check %d pool %q queue %q; want check %d pool default queue %q",
								r.Text, r.Check, r.Pool, r.Queue, tc.check, tc.queue)
						}
						if tc.requested > 0 && (r.Requested.GPU != tc.requested || r.Available.GPU != tc.available || r.Nodes != tc.nodes) {
							t.Errorf("reason %q: requested %d, available %d milli-GPUs, %d nodes; want %d, %d, %d",
								r.Text, r.Requested.GPU, r.Available.GPU, r.Nodes, tc.requested, tc.available, tc.nodes)
						}
						return
					}
				}
				t.Fatalf("%s waits for %q, none containing %q", want, scheduling.Texts(w.Reasons), tc.phrase)
			}
			t.Fatalf("%s is not waiting; plan %+v", want, plan)
		})
	}
}
