package scheduling_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
	. "github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

// TestConsolidate: a pending workload that fits the pool's free resources in
// total but no node gets room by moving running preemptible units, only when
// every moved unit is placed again in the same plan; the fewest GPUs moved,
// then the fewest workloads, then the newest (SCHEDULING.md §3
// "Consolidate"); for one pod and for gangs.
func TestConsolidate(t *testing.T) {
	runCycleCases(t, map[string]cycleCase{
		"a fragmented pool: the fewest GPUs move": {
			// n1 has 1 GPU free, n2 3: moving y (1 GPU) to n1 frees n2 for j;
			// moving x1 and x2 (3 GPUs) to n2 would free n1.
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).
				Project("p", "", Deserved(4)).
				Project("q", "", Deserved(4)).
				Workload(
					W("x1").Project("p").GPU(1).On("n1"),
					W("x2").Project("p").GPU(2).On("n1"),
					W("y").Project("q").GPU(1).On("n2"),
					W("j").Project("p").GPU(4).At(time.Minute)),
			wantBound:   map[string][]string{"j": {"n2"}, "y": {"n1"}},
			wantEvicted: []evicted{{"y", scheduling.RuleConsolidation, "j"}},
		},
		"equal moves: the fewest workloads, then the newest": {
			// Freeing n1 moves a (2 GPUs, one workload); freeing n2 moves b1
			// and b2 (2 GPUs, two); freeing n3 moves the newer c.
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).Node("n3", 4).Node("n4", 4).
				Project("p", "", Deserved(16)).
				Workload(
					W("a").Project("p").GPU(2).On("n1"),
					W("b1").Project("p").GPU(1).On("n2"),
					W("b2").Project("p").GPU(1).On("n2"),
					W("c").Project("p").GPU(2).On("n3").At(time.Second),
					W("d").Project("p").GPU(2).On("n4"),
					W("j").Project("p").GPU(4).At(time.Minute)),
			wantBound:   map[string][]string{"j": {"n3"}, "c": {"n1"}},
			wantEvicted: []evicted{{"c", scheduling.RuleConsolidation, "j"}},
		},
		"nothing moves when the moved work would not be placed again": {
			// 2 GPUs free in total, one per node; a and b (3 GPUs each) fit
			// nowhere else.
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).
				Project("p", "", Deserved(8)).
				Workload(
					W("a").Project("p").GPU(3).On("n1"),
					W("b").Project("p").GPU(3).On("n2"),
					W("j").Project("p").GPU(2).At(time.Minute)),
			wantWaiting: map[string]string{"j": "needs 2 GPUs on one node; the largest free block is 1"},
		},
		"nothing moves when the pool is full rather than fragmented": {
			cluster: NewCluster().Node("n1", 2).Node("n2", 2).
				Project("p", "", Deserved(4)).
				Workload(
					W("a").Project("p").GPU(1).On("n1"),
					W("b").Project("p").GPU(2).On("n2"),
					W("j").Project("p").GPU(2).At(time.Minute)),
			wantWaiting: map[string]string{"j": "needs 2 GPUs on one node; the largest free block is 1"},
		},
		"non-preemptible work never moves, though moving it would cost less": {
			// Moving y (1 GPU, build) would do; x1 and x2 (3 GPUs) move instead.
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).
				Project("p", "", Deserved(4)).
				Project("q", "", Deserved(4)).
				Workload(
					W("x1").Project("p").GPU(1).On("n1"),
					W("x2").Project("p").GPU(2).On("n1"),
					W("y").Project("q").GPU(1).Priority(build).On("n2"),
					W("j").Project("p").GPU(4).At(time.Minute)),
			wantBound: map[string][]string{"j": {"n1"}, "x1": {"n2"}, "x2": {"n2"}},
			wantEvicted: []evicted{
				{"x1", scheduling.RuleConsolidation, "j"},
				{"x2", scheduling.RuleConsolidation, "j"},
			},
		},
		"only non-preemptible work could move: j waits": {
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).
				Project("p", "", Deserved(8)).
				Workload(
					W("x").Project("p").GPU(2).Priority(build).On("n1"),
					W("y").Project("p").GPU(2).Priority(inference).On("n2"),
					W("j").Project("p").GPU(4).At(time.Minute)),
			wantWaiting: map[string]string{"j": "needs 4 GPUs on one node; the largest free block is 2"},
		},
		"one pod above an elastic workload's minimum moves alone": {
			// e holds 2 pods (minimum 1), one per node; moving its second pod
			// to n1 frees n2 for j.
			cluster: NewCluster().Node("n1", 2).Node("n2", 2).
				Project("p", "", Deserved(4)).
				Workload(
					W("e").Project("p").GPU(1).Pods(2).MinPods(1).On("n1", "n2"),
					W("j").Project("p").GPU(2).At(time.Minute)),
			wantBound:   map[string][]string{"j": {"n2"}, "e": {"n1"}},
			wantEvicted: []evicted{{"e", scheduling.RuleConsolidation, "j"}},
		},
		"a gang placed by moving the fewest GPUs": {
			// j needs two free 4-GPU nodes; 9 GPUs are free, none of the
			// nodes is. Opening n1 and n3 moves a and c (2 GPUs, to n4 and
			// n2); opening n2 too would move b (2 GPUs more).
			cluster:   gangOnFourNodes(train),
			wantBound: map[string][]string{"j": {"n1", "n3"}, "a": {"n4"}, "c": {"n2"}},
			wantEvicted: []evicted{
				{"a", scheduling.RuleConsolidation, "j"},
				{"c", scheduling.RuleConsolidation, "j"},
			},
		},
		"a gang: nothing moves when the moves would not place every pod": {
			// 4 GPUs free in all (1, 1, 2) for two 2-GPU pods: one fits on
			// n3; any node opened for the other leaves its work no room.
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).Node("n3", 4).
				Project("p", "", Deserved(12)).
				Workload(
					W("a").Project("p").GPU(3).On("n1"),
					W("b").Project("p").GPU(3).On("n2"),
					W("c").Project("p").GPU(2).On("n3"),
					W("j").Project("p").GPU(2).Pods(2).At(time.Minute)),
			wantWaiting: map[string]string{"j": "needs 2 pods of 2 GPUs"},
		},
		"a gang: non-preemptible work never moves, though moving it would cost less": {
			// As in the first gang case, but c is a build: a and b (3 GPUs)
			// move to open n1 and n2, both to n3 (b first, the larger).
			cluster:   gangOnFourNodes(build),
			wantBound: map[string][]string{"j": {"n1", "n2"}, "a": {"n3"}, "b": {"n3"}},
			wantEvicted: []evicted{
				{"a", scheduling.RuleConsolidation, "j"},
				{"b", scheduling.RuleConsolidation, "j"},
			},
		},
		"a moved gang is placed again whole": {
			// g's two pods hold a GPU each on n1 and n2; moving g (2 GPUs,
			// one workload) opens both for j, and g's pods both go to n3.
			cluster: NewCluster().Node("n1", 4).Node("n2", 4).Node("n3", 4).Node("n4", 4).
				Project("p", "", Deserved(16)).
				Workload(
					W("g").Project("p").GPU(1).Pods(2).On("n1", "n2"),
					W("x").Project("p").GPU(2).Priority(build).On("n3"),
					W("y").Project("p").GPU(2).Priority(build).On("n4"),
					W("j").Project("p").GPU(4).Pods(2).At(time.Minute)),
			wantBound:   map[string][]string{"j": {"n1", "n2"}, "g": {"n3", "n3"}},
			wantEvicted: []evicted{{"g", scheduling.RuleConsolidation, "j"}},
		},
		"a gang past the exact search: the nodes cheapest to open, all their units": {
			// n1 and n2 each hold seven 1-GPU trainings (14 units, more than
			// the exact search draws); n3-n5 a 1-GPU build each. j's two
			// 8-GPU pods take n1 and n2; the trainings go to n3 and n4.
			cluster:     crowdedNodes(),
			wantBound:   crowdedMoves(),
			wantEvicted: crowdedEvictions(),
		},
	})
}

// gangOnFourNodes has four 4-GPU nodes holding a (1 GPU), b (2), c (1, of
// the given priority) and d (3), one per node, and a pending gang j of two
// 4-GPU pods: 9 GPUs free, no node free.
func gangOnFourNodes(c cluster.Priority) *Cluster {
	return NewCluster().Node("n1", 4).Node("n2", 4).Node("n3", 4).Node("n4", 4).
		Project("p", "", Deserved(16)).
		Workload(
			W("a").Project("p").GPU(1).On("n1"),
			W("b").Project("p").GPU(2).On("n2"),
			W("c").Project("p").GPU(1).Priority(c).On("n3"),
			W("d").Project("p").GPU(3).On("n4"),
			W("j").Project("p").GPU(4).Pods(2).At(time.Minute))
}

// crowdedNodes has five 8-GPU nodes: a1-a7 (1 GPU each) on n1, b1-b7 on n2,
// a 1-GPU build on each of n3, n4 and n5, and a pending j of two 8-GPU pods.
func crowdedNodes() *Cluster {
	c := NewCluster()
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		c = c.Node(n, 8)
	}
	c = c.Project("p", "", Deserved(40))
	for i := 1; i <= 7; i++ {
		c = c.Workload(W(fmt.Sprintf("a%d", i)).Project("p").GPU(1).On("n1"),
			W(fmt.Sprintf("b%d", i)).Project("p").GPU(1).On("n2"))
	}
	return c.Workload(W("x3").Project("p").GPU(1).Priority(build).On("n3"),
		W("x4").Project("p").GPU(1).Priority(build).On("n4"),
		W("x5").Project("p").GPU(1).Priority(build).On("n5"),
		W("j").Project("p").GPU(8).Pods(2).At(time.Minute))
}

// crowdedMoves: j on n1 and n2; a1-a7 fill n3, then b1-b7 n4 (binpack).
func crowdedMoves() map[string][]string {
	out := map[string][]string{"j": {"n1", "n2"}}
	for i := 1; i <= 7; i++ {
		out[fmt.Sprintf("a%d", i)] = []string{"n3"}
		out[fmt.Sprintf("b%d", i)] = []string{"n4"}
	}
	return out
}

func crowdedEvictions() []evicted {
	var out []evicted
	for _, side := range []string{"a", "b"} {
		for i := 1; i <= 7; i++ {
			out = append(out, evicted{fmt.Sprintf("%s%d", side, i), scheduling.RuleConsolidation, "j"})
		}
	}
	return out
}
