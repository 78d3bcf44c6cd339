package scheduling_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/fairshare"
	"github.com/runwayhq/runway/pkg/scheduling"
	"github.com/runwayhq/runway/pkg/scheduling/schedtest"
	. "github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

// holding is n running 1-GPU workloads of project on node.
func holding(prefix, project, node string, n int) []*Workload {
	out := make([]*Workload, n)
	for i := range out {
		out[i] = W(prefix + "-" + string(rune('a'+i))).Project(project).GPU(1).On(node)
	}
	return out
}

// TestTimeBasedFairShares plays §2's time-based rule through
// ComputeFairShares: usage accrued from what queues held (AccrueUsage) moves
// the over-quota weights, and each queue records u, s and w'.
func TestTimeBasedFairShares(t *testing.T) {
	// team-a holds all 8 GPUs while team-b asks for 8.
	aHeldAll := func() *Cluster {
		return NewCluster().Node("n1", 8).
			Project("team-a", "").Project("team-b", "").
			Workload(holding("a", "team-a", "n1", 8)...).
			Workload(asking("b", "team-b", 8))
	}
	tests := map[string]struct {
		cluster   *Cluster
		timeBased fairshare.TimeBased
		used      time.Duration // how long the cluster is held as built before the pending work counts
		want      map[string]float64
		wantAdj   map[string]adj
	}{
		"the scenario's worked example: 2 hours of all 8 GPUs give team-a 2 and team-b 6": {
			cluster:   aHeldAll(),
			timeBased: fairshare.TimeBased{HalfLife: time.Hour, K: 0.5}, used: 2 * time.Hour,
			want:    map[string]float64{"team-a": 2, "team-b": 6},
			wantAdj: map[string]adj{"team-a": {1, 0.5, 0.5}, "team-b": {0, 0.5, 1.5}},
		},
		"k = 0 leaves the weights: 4 and 4 as without time-based fair share": {
			cluster:   aHeldAll(),
			timeBased: fairshare.TimeBased{HalfLife: time.Hour, K: 0}, used: 2 * time.Hour,
			want:    map[string]float64{"team-a": 4, "team-b": 4},
			wantAdj: map[string]adj{"team-a": {1, 0.5, 1}, "team-b": {0, 0.5, 1}},
		},
		"with k = 1 the queue that used everything at half the weight gets nothing over quota": {
			cluster:   aHeldAll(),
			timeBased: fairshare.TimeBased{HalfLife: time.Hour, K: 1}, used: 2 * time.Hour,
			want:    map[string]float64{"team-a": 0, "team-b": 8},
			wantAdj: map[string]adj{"team-a": {1, 0.5, 0}, "team-b": {0, 0.5, 2}},
		},
		"deserved quotas are never touched, only what is left": {
			cluster: NewCluster().Node("n1", 8).
				Project("team-a", "", Deserved(3)).Project("team-b", "").
				Workload(holding("a", "team-a", "n1", 8)...).
				Workload(asking("b", "team-b", 8)),
			timeBased: fairshare.TimeBased{HalfLife: time.Hour, K: 1}, used: 2 * time.Hour,
			want: map[string]float64{"team-a": 3, "team-b": 5},
		},
		"a queue of weight 0 keeps 0; the others share by their adjusted weights": {
			cluster: NewCluster().Node("n1", 8).
				Project("team-a", "").Project("team-z", "", Weight(0)).Project("team-b", "").
				Workload(holding("a", "team-a", "n1", 8)...).
				Workload(asking("z", "team-z", 8), asking("b", "team-b", 8)),
			timeBased: fairshare.TimeBased{HalfLife: time.Hour, K: 0.5}, used: 2 * time.Hour,
			want:    map[string]float64{"team-a": 2, "team-z": 0, "team-b": 6},
			wantAdj: map[string]adj{"team-a": {1, 0.5, 0.5}, "team-z": {0, 0, 0}, "team-b": {0, 0.5, 1.5}},
		},
		"one queue alone keeps its weight and the whole pool": {
			cluster: NewCluster().Node("n1", 8).
				Project("team-a", "").
				Workload(holding("a", "team-a", "n1", 4)...).
				Workload(asking("a-more", "team-a", 8)),
			timeBased: fairshare.TimeBased{HalfLife: time.Hour, K: 0.5}, used: 2 * time.Hour,
			want:    map[string]float64{"team-a": 8},
			wantAdj: map[string]adj{"team-a": {1, 1, 1}},
		},
		"departments: usage moves the division between departments, then inside one": {
			// d1's p1 held 8 GPUs: at the root d1 gets 2 and d2 6; inside d1,
			// p1 and p2 are offered 0.5 and 1.5, floored to 0 and 1, and the
			// last GPU goes to the equal fraction created first (p1).
			cluster: NewCluster().Node("n1", 8).
				Department("d1", 0).Department("d2", 0).
				Project("p1", "d1").Project("p2", "d1").Project("p3", "d2").
				Workload(holding("a", "p1", "n1", 8)...).
				Workload(asking("p2-job", "p2", 8), asking("p3-job", "p3", 8)),
			timeBased: fairshare.TimeBased{HalfLife: time.Hour, K: 0.5}, used: 2 * time.Hour,
			want: map[string]float64{"d1": 2, "d2": 6, "p1": 1, "p2": 1, "p3": 6},
			wantAdj: map[string]adj{"d1": {1, 0.5, 0.5}, "d2": {0, 0.5, 1.5},
				"p1": {1, 0.5, 0.5}, "p2": {0, 0.5, 1.5}, "p3": {0, 1, 2 * 0.75}},
		},
		"old usage decays: after ten half-lives of equal use the split is even again": {
			cluster: NewCluster().Node("n1", 8).
				Project("team-a", "").Project("team-b", "").
				Workload(holding("a", "team-a", "n1", 4)...).
				Workload(W("b-run").Project("team-b").GPU(4).On("n1")).
				Workload(asking("a-more", "team-a", 8), asking("b-more", "team-b", 8)),
			timeBased: fairshare.TimeBased{HalfLife: time.Hour, K: 0.5}, used: 10 * time.Hour,
			want:    map[string]float64{"team-a": 4, "team-b": 4},
			wantAdj: map[string]adj{"team-a": {0.5, 0.5, 1}, "team-b": {0.5, 0.5, 1}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := tc.cluster.State()
			p := s.Pool("default")
			p.TimeBased = tc.timeBased
			scheduling.AccrueUsage(s, tc.used)
			scheduling.ComputeFairShares(s)
			got := map[string]float64{}
			for name := range tc.want {
				got[name] = float64(s.Queue(name).FairShare[p.Index].GPU) / 1000
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GPU fair shares (-want +got):\n%s", diff)
			}
			for name, w := range tc.wantAdj {
				a := s.Queue(name).Adjusted[p.Index][cluster.GPU]
				if g := (adj{a.UsageShare, a.WeightShare, a.Weight}); !nearAdj(g, w) {
					t.Errorf("%s: u, s, w' = %v, want %v", name, g, w)
				}
			}
		})
	}
}

// adj is u, s and w' of one queue.
type adj struct{ U, S, W float64 }

func nearAdj(x, y adj) bool {
	d := func(p, q float64) bool { return p-q < 1e-6 && q-p < 1e-6 }
	return d(x.U, y.U) && d(x.S, y.S) && d(x.W, y.W)
}

// Usage accrues only in pools with time-based fair share, and turning it off
// forgets it.
func TestAccrueUsage(t *testing.T) {
	s := NewCluster().Node("n1", 8).Pool("other").Node("o1", 8).
		Project("team-a", "").
		Workload(holding("a", "team-a", "n1", 2)...).
		Workload(W("o").Project("team-a").GPU(1).Pools("other").On("o1")).
		State()
	def, other := s.Pool("default"), s.Pool("other")
	def.TimeBased = fairshare.TimeBased{HalfLife: time.Hour, K: 1}
	scheduling.AccrueUsage(s, time.Hour)
	q := s.Queue("team-a")
	want := fairshare.Accrue(0, 2000, time.Hour, time.Hour)
	if got := q.Decayed[def.Index][cluster.GPU]; got != want {
		t.Errorf("default pool: usage %v, want %v", got, want)
	}
	if got := s.Queue(cluster.DefaultDepartment).Decayed[def.Index][cluster.GPU]; got != want {
		t.Errorf("the department: usage %v, want its project's %v", got, want)
	}
	if got := q.Decayed[other.Index]; got != (cluster.Decayed{}) {
		t.Errorf("pool without time-based fair share: usage %v, want none", got)
	}
	def.TimeBased = fairshare.TimeBased{}
	scheduling.AccrueUsage(s, time.Second)
	if got := q.Decayed[def.Index]; got != (cluster.Decayed{}) {
		t.Errorf("after turning it off: usage %v, want none", got)
	}
}

// Each resource's leftover is divided by that resource's own over-quota
// weights (SCHEDULING.md §1: the quota fields are per resource).
func TestPerResourceWeights(t *testing.T) {
	s := NewCluster().Node("n1", 8, Cores(16), RAMGiB(16)).
		Project("a", "", DeservedCPU(0), WeightOf(cluster.GPU, 3), WeightOf(cluster.CPU, 1), WeightOf(cluster.Memory, 1)).
		Project("b", "", DeservedCPU(0), WeightOf(cluster.GPU, 1), WeightOf(cluster.CPU, 3), WeightOf(cluster.Memory, 1)).
		Workload(
			W("a-job").Project("a").GPU(1).CPU(2).MemoryGiB(2).Pods(20).MinPods(1),
			W("b-job").Project("b").GPU(1).CPU(2).MemoryGiB(2).Pods(20).MinPods(1)).
		State()
	for _, q := range s.Projects() {
		q.Quotas[0].Deserved.Memory = 0
	}
	scheduling.ComputeFairShares(s)
	got := map[string]cluster.Resources{}
	for _, q := range s.Projects() {
		got[q.Name] = q.FairShare[0]
	}
	// GPUs 3 : 1, cores 1 : 3, memory 1 : 1.
	want := map[string]cluster.Resources{
		"a": {GPU: 6000, CPU: 4000, Memory: 8 << 30},
		"b": {GPU: 2000, CPU: 12000, Memory: 8 << 30},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fair shares (-want +got):\n%s", diff)
	}
}

// TestPropertyTimeBased plays random clusters with time-based fair share on
// in every pool (random half-life and k), usage accrued between cycles as
// the clock moves, and checks what every cycle must still hold: fair shares,
// plans, quotas. With k = 0 the plans are those without the setting.
func TestPropertyTimeBased(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := schedtest.RandomSpec(t)
		tb := fairshare.TimeBased{
			HalfLife: rapid.SampledFrom([]time.Duration{time.Minute, 10 * time.Minute, time.Hour}).Draw(t, "halfLife"),
			K:        rapid.SampledFrom([]float64{0, 0.5, 1, 3}).Draw(t, "k"),
		}
		s, plain := spec.Build(nil), spec.Build(nil)
		for _, p := range s.Pools {
			p.TimeBased = tb
		}
		cfg := spec.Config
		for i := range 12 {
			cfg.Now = time.Duration(i) * 30 * time.Second
			scheduling.AccrueUsage(s, 30*time.Second)
			plan := scheduling.Cycle(s, cfg)
			for _, p := range fairShareProblems(s) {
				t.Errorf("cycle %d: %s", i, p)
			}
			for _, p := range planProblems(s, plan, cfg) {
				t.Errorf("cycle %d: %s", i, p)
			}
			if tb.K == 0 {
				if diff := cmp.Diff(scheduling.Cycle(plain, cfg), plan); diff != "" {
					t.Fatalf("cycle %d: k = 0 changed the plan (-without +with):\n%s", i, diff)
				}
				if err := scheduling.Apply(plain, plan, cfg.Now); err != nil {
					t.Fatalf("cycle %d: Apply without the setting: %v", i, err)
				}
			}
			if err := scheduling.Apply(s, plan, cfg.Now); err != nil {
				t.Fatalf("cycle %d: Apply: %v", i, err)
			}
			for _, p := range invariants(s) {
				t.Errorf("after cycle %d: %s", i, p)
			}
			if t.Failed() {
				t.FailNow()
			}
		}
	})
}
