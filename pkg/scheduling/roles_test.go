package scheduling_test

import (
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/scheduling"
	. "github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

// TestRoles: a distributed training's master (pod 0, its own request) and
// workers are one gang: placed together, each pod where its own request
// fits, or not at all; quota counts the master's request, not a worker's.
func TestRoles(t *testing.T) {
	runCycleCases(t, map[string]cycleCase{
		"a 4-GPU master and two 1-GPU workers are placed together, each where it fits": {
			cluster: NewCluster().Node("n1", 4).Node("n2", 2).
				Project("p", "", Deserved(6)).
				Workload(W("d").Project("p").Master(4, 1).GPU(1).Pods(3)),
			wantBound: map[string][]string{"d": {"n1", "n2", "n2"}},
		},
		"a CPU-only launcher and two 2-GPU workers: the launcher takes no GPU": {
			cluster: NewCluster().Node("n1", 2).Node("n2", 2).
				Project("p", "", Deserved(4)).
				Workload(W("d").Project("p").Master(0, 1).GPU(2).Pods(3)),
			wantBound:   map[string][]string{"d": {"n1", "n1", "n2"}},
			wantDevices: map[string][][]int{"d": {nil, {0, 1}, {0, 1}}},
		},
		"workers that fit are not placed when the master does not": {
			cluster: NewCluster().Node("n1", 2).Node("n2", 2).
				Project("p", "", Deserved(4)).
				Workload(W("d").Project("p").Master(4, 1).GPU(1).Pods(3)),
			wantWaiting: map[string]string{"d": ""},
		},
		"a master that fits is not placed when not every worker does": {
			cluster: NewCluster().Node("n1", 2).Node("n2", 1).
				Project("p", "", Deserved(4)).
				Workload(W("d").Project("p").Master(1, 1).GPU(2).Pods(3)),
			wantWaiting: map[string]string{"d": "needs a master of 1 GPU on one node and 2 pods of 2 GPUs on one node; 2 fit"},
		},
		"quota counts the master's GPUs: 4 + 2 x 1 is above a limit of 5": {
			cluster: NewCluster().Node("n1", 4).Node("n2", 2).
				Project("p", "", Deserved(5), Limit(5)).
				Workload(W("d").Project("p").Master(4, 1).GPU(1).Pods(3)),
			wantWaiting: map[string]string{"d": "would hold 6 GPUs, above its limit of 5"},
		},
		"an elastic training: master and workers up to its minimum together, then more workers as room allows": {
			cluster: NewCluster().Node("n1", 2).
				Project("p", "", Deserved(2)).
				Workload(W("d").Project("p").Master(0, 1).GPU(1).Pods(4).MinPods(2)),
			wantBound: map[string][]string{"d": {"n1", "n1", "n1"}},
		},
		"a master larger than the workers preempts room for the whole gang": {
			cluster: NewCluster().Node("n1", 4).Node("n2", 2).
				Project("p", "", Deserved(6)).
				Workload(
					W("low").Project("p").GPU(4).On("n1"),
					W("d").Project("p").Priority(interactive).Master(4, 1).GPU(1).Pods(3).At(time.Second)),
			wantBound:   map[string][]string{"d": {"n1", "n2", "n2"}},
			wantEvicted: []evicted{{"low", scheduling.RulePreempt, "d"}},
			wantWaiting: map[string]string{"low": "evicted (preempt)"},
		},
	})
}
