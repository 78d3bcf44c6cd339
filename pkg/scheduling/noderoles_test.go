package scheduling_test

import (
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
	. "github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

// Node roles through whole cycles: placement, reclaim and the reasons all
// follow placement.Eligible. Without roles reclaim takes the newest victim
// (b2, on the plain node); with node g the only gpu-worker it must free g,
// the only node j may use. A CPU-only workload goes to the cpu-worker, and
// a system node takes no GPU workload even when it alone has room.
func TestCycle_NodeRoles(t *testing.T) {
	victims := func(roles cluster.NodeRoles) *Cluster {
		return NewCluster().Node("g", 2, Roles(roles)).Node("n", 2).
			Project("a", "", Deserved(2)).Project("b", "", Deserved(0)).
			Workload(W("b1").Project("b").GPU(2).At(time.Second).On("g"),
				W("b2").Project("b").GPU(2).At(2*time.Second).On("n"),
				W("j").Project("a").GPU(2).At(3*time.Second))
	}
	runCycleCases(t, map[string]cycleCase{
		"no roles: reclaim takes the newest victim": {
			cluster:     victims(0),
			wantBound:   map[string][]string{"j": {"n"}},
			wantEvicted: []evicted{{"b2", scheduling.RuleReclaim, "j"}},
			wantWaiting: map[string]string{"b2": "evicted (reclaim)"},
		},
		"gpu-worker: reclaim frees the gpu-worker only": {
			cluster:     victims(cluster.RoleGPUWorker),
			wantBound:   map[string][]string{"j": {"g"}},
			wantEvicted: []evicted{{"b1", scheduling.RuleReclaim, "j"}},
			wantWaiting: map[string]string{"b1": "evicted (reclaim)"},
		},
		"cpu-worker: a CPU-only workload goes there": {
			cluster: NewCluster().Node("a", 2).Node("c", 0, Roles(cluster.RoleCPUWorker)).Project("p", "", Deserved(2)).
				Workload(W("cpu").Project("p").GPU(0).CPU(4), W("gpu").Project("p").GPU(1)),
			wantBound: map[string][]string{"cpu": {"c"}, "gpu": {"a"}},
		},
		"system: no GPU workload even with room": {
			cluster: NewCluster().Node("s", 4, Roles(cluster.RoleSystem)).Node("n", 1).Project("p", "", Deserved(4)).
				Workload(W("r").Project("p").GPU(1).Priority(build).On("n"), W("j").Project("p").GPU(1).Priority(build)),
			wantWaiting: map[string]string{"j": "the largest free block on a non-system node is 0 GPUs"},
		},
	})
}
