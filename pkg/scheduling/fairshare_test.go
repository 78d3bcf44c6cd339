package scheduling_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
	. "github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

// asking submits a pending workload of n 1-GPU pods (minimum 1) to project:
// its request grows by n GPUs.
func asking(name, project string, n int) *Workload {
	return W(name).Project(project).GPU(1).Pods(n).MinPods(1)
}

// TestComputeFairShares divides pools down the department → project tree
// (SCHEDULING.md §2) and checks every queue's GPU fair share.
func TestComputeFairShares(t *testing.T) {
	departmentsYAML := func() *Cluster {
		return NewCluster().Node("node-1", 4).Node("node-2", 4).
			Department("research", 6).
			Department("prod", 2).
			Project("r1", "research", Deserved(3)).
			Project("r2", "research", Deserved(3)).
			Project("p1", "prod", Deserved(2))
	}
	tests := map[string]struct {
		cluster *Cluster
		pool    string // "" for default
		want    map[string]float64
	}{
		"departments.yaml: each department and project gets its deserved quota when all ask for more": {
			cluster: departmentsYAML().Workload(
				asking("r1-job", "r1", 10), asking("r2-job", "r2", 10), asking("p1-job", "p1", 10)),
			want: map[string]float64{"research": 6, "prod": 2, "r1": 3, "r2": 3, "p1": 2},
		},
		"departments.yaml: an idle department's share goes to the other, split evenly between its projects": {
			cluster: departmentsYAML().Workload(asking("r1-job", "r1", 10), asking("r2-job", "r2", 10)),
			want:    map[string]float64{"research": 8, "prod": 0, "r1": 4, "r2": 4, "p1": 0},
		},
		"running work counts in the request like pending work": {
			cluster: departmentsYAML().Workload(
				W("r1-run").Project("r1").GPU(4).On("node-1"),
				asking("r1-job", "r1", 6), asking("r2-job", "r2", 10), asking("p1-job", "p1", 1)),
			want: map[string]float64{"research": 7, "prod": 1, "r1": 4, "r2": 3, "p1": 1},
		},
		"the documentation's example: T=36, quotas 10, 6, 0, weights 2, 3, 1 give 17, 16, 3": {
			cluster: NewCluster().Node("n1", 36).
				Project("a", "", Deserved(10), Weight(2)).
				Project("b", "", Deserved(6), Weight(3)).
				Project("c", "", Deserved(0), Weight(1)).
				Workload(asking("a-job", "a", 40), asking("b-job", "b", 40), asking("c-job", "c", 40)),
			want: map[string]float64{"default": 36, "a": 17, "b": 16, "c": 3},
		},
		"T=11, two projects deserving 2 with weights 1 and 4 get 3 and 8": {
			cluster: NewCluster().Node("n1", 11).
				Project("a", "", Deserved(2), Weight(1)).
				Project("b", "", Deserved(2), Weight(4)).
				Workload(asking("a-job", "a", 20), asking("b-job", "b", 20)),
			want: map[string]float64{"default": 11, "a": 3, "b": 8},
		},
		"the same example inside a department that deserves the whole pool": {
			cluster: NewCluster().Node("n1", 11).
				Department("d", 11).
				Project("a", "d", Deserved(2), Weight(1)).
				Project("b", "d", Deserved(2), Weight(4)).
				Workload(asking("a-job", "a", 20), asking("b-job", "b", 20)),
			want: map[string]float64{"d": 11, "a": 3, "b": 8},
		},
		"a department's limit caps what its projects share; the leftover GPU goes to the project created first": {
			cluster: NewCluster().Node("n1", 8).
				Department("d", 0, Limit(3)).
				Project("p1", "d").
				Project("p2", "d").
				Workload(asking("p1-job", "p1", 4), asking("p2-job", "p2", 4)),
			want: map[string]float64{"d": 3, "p1": 2, "p2": 1},
		},
		"a project never gets more than it asks for; the rest goes to the others": {
			cluster: NewCluster().Node("n1", 8).
				Project("small", "", Deserved(4)).
				Project("big", "", Deserved(1)).
				Workload(asking("s", "small", 1), asking("b", "big", 20)),
			want: map[string]float64{"default": 8, "small": 1, "big": 7},
		},
		"over-quota off and weight 0 both keep a project at its deserved quota": {
			cluster: NewCluster().Node("n1", 8).
				Project("capped", "", Deserved(2), NoOverQuota()).
				Project("unweighted", "", Deserved(1), Weight(0)).
				Project("open", "", Deserved(0)).
				Workload(asking("c", "capped", 10), asking("u", "unweighted", 10), asking("o", "open", 10)),
			want: map[string]float64{"default": 8, "capped": 2, "unweighted": 1, "open": 5},
		},
		"deserved quotas above the pool are not scaled down": {
			cluster: NewCluster().Node("n1", 4).
				Project("a", "", Deserved(3)).
				Project("b", "", Deserved(3)).
				Workload(asking("a-job", "a", 5), asking("b-job", "b", 5)),
			want: map[string]float64{"default": 4, "a": 3, "b": 3},
		},
		"each pool is divided on its own": {
			cluster: NewCluster().Node("d1", 2).
				Pool("a100").Node("a1", 8).
				Project("x", "", Deserved(1), InPool("a100"), Deserved(6)).
				Project("y", "", Deserved(1), InPool("a100"), Deserved(2)).
				Workload(
					asking("x-job", "x", 10).Pools("a100"), asking("y-job", "y", 10).Pools("a100"),
					asking("x-def", "x", 1)),
			pool: "a100",
			want: map[string]float64{"default": 8, "x": 6, "y": 2},
		},
		"the default pool of the same cluster only sees what asks for it": {
			cluster: NewCluster().Node("d1", 2).
				Pool("a100").Node("a1", 8).
				Project("x", "", Deserved(1), InPool("a100"), Deserved(6)).
				Project("y", "", Deserved(1), InPool("a100"), Deserved(2)).
				Workload(
					asking("x-job", "x", 10).Pools("a100"), asking("y-job", "y", 10).Pools("a100"),
					asking("x-def", "x", 1)),
			want: map[string]float64{"default": 1, "x": 1, "y": 0},
		},
		"a GPU-memory request counts memory over the pool's smallest device": {
			cluster: NewCluster().Node("n1", 2, DeviceMemoryGiB(40)).Node("n2", 2, DeviceMemoryGiB(80)).
				Project("m", "").
				Workload(W("m-job").Project("m").GPUMemoryGiB(20).Pods(3)),
			want: map[string]float64{"default": 1.5, "m": 1.5},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := tc.cluster.State()
			scheduling.ComputeFairShares(s)
			pool := tc.pool
			if pool == "" {
				pool = "default"
			}
			p := s.Pool(pool)
			got := map[string]float64{}
			for name := range tc.want {
				q := s.Queue(name)
				if q == nil {
					t.Fatalf("no queue %s", name)
				}
				got[name] = float64(q.FairShare[p.Index].GPU) / 1000
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GPU fair shares in %s (-want +got):\n%s", pool, diff)
			}
		})
	}
}

// Fair share is divided per resource: CPU with deserved cores as GPUs with
// deserved GPUs.
func TestComputeFairSharesCPU(t *testing.T) {
	s := NewCluster().Node("n1", 0, Cores(16)).
		Project("a", "", DeservedCPU(4)).
		Project("b", "", DeservedCPU(2), Weight(3)).
		Workload(
			W("a-job").Project("a").CPU(1).Pods(20).MinPods(1),
			W("b-job").Project("b").CPU(1).Pods(20).MinPods(1)).
		State()
	scheduling.ComputeFairShares(s)
	got := map[string]int64{}
	for _, q := range s.Projects() {
		got[q.Name] = q.FairShare[0].CPU
	}
	// 16 cores: 4 + 2 deserved, 10 over quota at weights 1 : 3 = 2.5 and 7.5,
	// floored to 2 and 7, and the last core to the larger fraction (0.5 each:
	// the project created first).
	want := map[string]int64{"a": 7000, "b": 9000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CPU fair shares in milli-cores (-want +got):\n%s", diff)
	}
	if d := s.Queue(cluster.DefaultDepartment).FairShare[0].CPU; d != 16000 {
		t.Errorf("department default: CPU fair share %d, want 16000", d)
	}
}
