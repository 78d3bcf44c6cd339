package scheduling_test

import (
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/scheduling"
	. "github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

// TestElastic: a workload at or above its gang minimum with pods still to
// add asks for one more pod; when allocate cannot place it, it reclaims and
// preempts like any pending workload (SCHEDULING.md §3 "Elastic workloads
// in reclaim and preempt"); and the gang minimum holds for every workload.
func TestElastic(t *testing.T) {
	runCycleCases(t, map[string]cycleCase{
		"an elastic workload at its minimum reclaims its next pod from a project above its fair share": {
			// p deserves the 2 GPUs; q, deserving none, holds one.
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(2)).
				Project("q", "", Deserved(0)).
				Workload(
					W("e").Project("p").GPU(1).Pods(3).MinPods(1).On("n1"),
					W("v").Project("q").GPU(1).On("n1").At(time.Second)),
			wantBound:   map[string][]string{"e": {"n1"}},
			wantEvicted: []evicted{{"v", scheduling.RuleReclaim, "e"}},
			wantWaiting: map[string]string{"v": "evicted (reclaim)"},
		},
		"an elastic workload reclaims no pod past its fair share": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(1)).
				Project("q", "", Deserved(1)).
				Workload(
					W("e").Project("p").GPU(1).Pods(2).MinPods(1).On("n1"),
					W("v").Project("q").GPU(1).On("n1").At(time.Second)),
			wantWaiting: map[string]string{"e": "above its fair share of 1; it cannot reclaim"},
		},
		"an elastic workload preempts a lower priority of its project for its next pod": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(2)).
				Workload(
					W("e").Project("p").GPU(1).Pods(2).MinPods(1).Priority(interactive).On("n1"),
					W("t").Project("p").GPU(1).On("n1").At(time.Second)),
			wantBound:   map[string][]string{"e": {"n1"}},
			wantEvicted: []evicted{{"t", scheduling.RulePreempt, "e"}},
			wantWaiting: map[string]string{"t": "evicted (preempt)"},
		},
		"an elastic workload never evicts a pod of its own": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(4)).
				Workload(W("e").Project("p").GPU(1).Pods(4).MinPods(1).Priority(interactive).On("n1", "n1")),
			wantWaiting: map[string]string{"e": "needs 1 GPU on one node"},
		},
		"one pod at a time: the elastic workload's next pod takes one victim, not a set for all its pods": {
			// q holds two 1-GPU workloads over its fair share of 0; e, deserving
			// 3, asks for one pod now, then for the next in the next round.
			cluster: NewCluster().Node("n1", 3).
				Project("p", "", Deserved(3)).
				Project("q", "", Deserved(0)).
				Workload(
					W("e").Project("p").GPU(1).Pods(3).MinPods(1).On("n1"),
					W("v1").Project("q").GPU(1).On("n1").At(time.Second),
					W("v2").Project("q").GPU(1).On("n1").At(2*time.Second)),
			wantBound: map[string][]string{"e": {"n1", "n1"}},
			wantEvicted: []evicted{
				{"v1", scheduling.RuleReclaim, "e"},
				{"v2", scheduling.RuleReclaim, "e"},
			},
			wantWaiting: map[string]string{"v1": "evicted (reclaim)", "v2": "evicted (reclaim)"},
		},
		"a non-preemptible gang below its minimum for 60 s is evicted whole": {
			cluster: NewCluster().Node("n1", 2).Node("n2", 2).
				Project("p", "", Deserved(3)).
				Project("q", "", Deserved(2)).
				Workload(
					W("g").Project("p").GPU(1).Pods(3).Priority(build).On("n1", "n1"),
					W("f").Project("q").GPU(2).Priority(inference).On("n2")),
			now:         60 * time.Second,
			wantEvicted: []evicted{{"g", scheduling.RuleGangMinimum, ""}},
			wantWaiting: map[string]string{"g": "evicted (gang-minimum): held 2 of its minimum 3 pods for 1m0s"},
		},
	})
}

// TestNewestPodPlacedLast: of two units of one workload, the newer is the
// pod placed last (SCHEDULING.md §4), not the one with the highest index: an
// elastic workload's pod placed again after a loss goes first.
func TestNewestPodPlacedLast(t *testing.T) {
	inOrder := func() *Cluster {
		return NewCluster().Node("n1", 3).
			Project("p", "", Deserved(3)).
			Workload(
				W("e").Project("p").GPU(1).Pods(3).MinPods(1).On("n1", "n1", "n1"),
				W("j").Project("p").GPU(1).Priority(interactive).At(time.Minute))
	}
	// Pod 0 of e lost its device and was placed on it again, after pods 1
	// and 2: it is the newest unit.
	replaced := inOrder()
	s := replaced.State()
	e := s.Workload("e")
	at := e.Placed[0]
	s.Unplace(e, 0)
	s.Place(e, 0, at.Node, at.Devices, at.Share)
	s.StopLog()
	runCycleCases(t, map[string]cycleCase{
		"pods placed in index order: the highest index goes first": {
			cluster:     inOrder(),
			wantBound:   map[string][]string{"j": {"n1"}},
			wantDevices: map[string][][]int{"j": {{2}}},
			wantEvicted: []evicted{{"e", scheduling.RulePreempt, "j"}},
			wantWaiting: map[string]string{"e": "1 pod(s) evicted (preempt)"},
		},
		"pod 0 placed last goes first": {
			cluster:     replaced,
			wantBound:   map[string][]string{"j": {"n1"}},
			wantDevices: map[string][][]int{"j": {{0}}},
			wantEvicted: []evicted{{"e", scheduling.RulePreempt, "j"}},
			wantWaiting: map[string]string{"e": "1 pod(s) evicted (preempt)"},
		},
	})
}
