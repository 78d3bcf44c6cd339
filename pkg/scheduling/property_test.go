package scheduling_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
	"github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

// TestPropertyEveryCycle plays a random cluster cycle by cycle, the clock
// moving 30 s each (so gangs left below their minimum by a lost node time
// out), and checks after every Cycle and every Apply what must always hold.
func TestPropertyEveryCycle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := schedtest.RandomSpec(t)
		s := spec.Build(nil)
		for _, p := range invariants(s) {
			t.Fatalf("as built: %s", p)
		}
		cfg := spec.Config
		for i := range 12 {
			cfg.Now = time.Duration(i) * 30 * time.Second
			before := summarize(s)
			plan := scheduling.Cycle(s, cfg)
			if diff := cmp.Diff(before, summarize(s)); diff != "" {
				t.Fatalf("cycle %d changed the state (-before +after):\n%s", i, diff)
			}
			for _, p := range fairShareProblems(s) {
				t.Errorf("cycle %d: %s", i, p)
			}
			for _, p := range planProblems(s, plan, cfg) {
				t.Errorf("cycle %d: %s", i, p)
			}
			if t.Failed() {
				t.FailNow()
			}
			held := placedCounts(s)
			if err := scheduling.Apply(s, plan, cfg.Now); err != nil {
				t.Fatalf("cycle %d: Apply: %v", i, err)
			}
			for _, p := range invariants(s) {
				t.Errorf("after cycle %d: %s", i, p)
			}
			for _, p := range gangProblems(s, held) {
				t.Errorf("after cycle %d: %s", i, p)
			}
			for _, p := range waitingProblems(s, plan) {
				t.Errorf("after cycle %d: %s", i, p)
			}
			if t.Failed() {
				t.FailNow()
			}
			if plan.Empty() && cfg.Now > cfg.GangTimeout {
				return
			}
		}
	})
}

// stableClusters is how many random clusters TestPropertyStable plays.
const stableClusters = 3000

// TestPropertyStable: plans settle (SCHEDULING.md §3 "Preempt"): with no
// change of input, a second cycle on the state the first produced makes no
// evictions (consolidation's moves aside); then the cluster is played until a plan changes nothing and
// the end state is checked. The clusters come from a fixed sequence of
// seeds, so every run checks the same thousands: the contract's own reclaim
// rules allow rare loops that random exploration finds (README "Loops the
// contract allows"), and a run must not depend on the draw.
//
// One input does change: a workload placed in a later pool of its list
// moves its request there, and the fair shares with it; then only the
// settling over cycles is checked.
func TestPropertyStable(t *testing.T) {
	played := 0
	prop := rapid.MakeFuzz(func(t *rapid.T) {
		spec := schedtest.RandomSpec(t)
		s := spec.Build(nil)
		cfg := spec.Config
		cfg.Now = 2 * time.Minute
		first := scheduling.Cycle(s, cfg)
		shares := fairShareTable(s)
		if err := scheduling.Apply(s, first, cfg.Now); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		second := scheduling.Cycle(s, cfg)
		if ev := preemptions(second); len(ev) > 0 && shares == fairShareTable(s) {
			t.Fatalf("the second cycle evicts %+v\nafter the first evicted %+v", ev, first.Evictions)
		}
		plans := schedtest.RunUntilStable(s, cfg)
		if !schedtest.Stable(plans) {
			t.Fatalf("no empty plan after %d cycles; the last:\n%+v", len(plans), plans[len(plans)-1])
		}
		for _, p := range invariants(s) {
			t.Errorf("stable: %s", p)
		}
		for _, p := range fairShareProblems(s) {
			t.Errorf("stable: %s", p)
		}
		for _, p := range waitingProblems(s, plans[len(plans)-1]) {
			t.Errorf("stable: %s", p)
		}
		played++
	})
	data := make([]byte, 1<<16) // far more than a cluster draws
	for seed := range uint64(stableClusters) {
		_, _ = rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 19}).Read(data)
		prop(t, data)
		if t.Failed() {
			t.Fatalf("cluster %d of %d", seed, stableClusters)
		}
	}
	if played != stableClusters {
		t.Fatalf("played %d clusters of %d", played, stableClusters)
	}
}

// preemptions are a plan's evictions but consolidation's moves: work placed
// in a cycle never moves in it (SCHEDULING.md §3 "Consolidate"), so the next
// cycle may move it. Nor do they count evictions for a workload those moves
// placed: an elastic gang placed by the moves may then reclaim or preempt
// for its next pod, which it could not do while waiting for its minimum.
func preemptions(plan scheduling.Plan) []scheduling.Eviction {
	movedFor := map[string]bool{}
	for _, e := range plan.Evictions {
		if e.Rule == scheduling.RuleConsolidation {
			movedFor[e.For] = true
		}
	}
	var out []scheduling.Eviction
	for _, e := range plan.Evictions {
		if e.Rule != scheduling.RuleConsolidation && !movedFor[e.For] {
			out = append(out, e)
		}
	}
	return out
}

// fairShareTable is every queue's fair shares, to compare two states.
func fairShareTable(s *cluster.State) string {
	var b strings.Builder
	for _, d := range s.Departments {
		fmt.Fprint(&b, d.Name, d.FairShare)
		for _, q := range d.Children {
			fmt.Fprint(&b, q.Name, q.FairShare)
		}
	}
	return b.String()
}

// TestPropertyDeterministic: the same cluster built twice gives the same
// plans, cycle after cycle; so does one built with its nodes added, and its
// running pods placed, in another order (neither order means anything).
func TestPropertyDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := schedtest.RandomSpec(t)
		cfg := spec.Config
		cfg.Now = 2 * time.Minute
		want := schedtest.RunUntilStable(spec.Build(nil), cfg)
		if diff := cmp.Diff(want, schedtest.RunUntilStable(spec.Build(nil), cfg)); diff != "" {
			t.Fatalf("the same cluster built twice gave other plans (-first +second):\n%s", diff)
		}
		if diff := cmp.Diff(want, schedtest.RunUntilStable(spec.Build(t), cfg)); diff != "" {
			t.Fatalf("the cluster built in another order gave other plans (-in order +shuffled):\n%s", diff)
		}
	})
}

// invariants lists what is wrong with s: bookkeeping that disagrees with the
// pods, devices or nodes over capacity, and quotas broken (limits, and
// non-preemptible work within deserved at every level).
func invariants(s *cluster.State) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }

	type usage struct{ alloc, np cluster.Resources }
	byQueue := map[*cluster.Queue][]usage{}
	for _, w := range s.Workloads() {
		var pool *cluster.Pool
		for pod, at := range w.Placed {
			if at.Node == nil {
				continue
			}
			n := at.Node
			if !n.Ready {
				bad("%s pod %d runs on %s, which is not Ready", w.ID, pod, n.Name)
			}
			if pool != nil && n.Pool != pool {
				bad("%s runs in two pools, %s and %s", w.ID, pool.Name, n.Pool.Name)
			}
			pool = n.Pool
			if !slices.Contains(w.Pools, n.Pool.Name) {
				bad("%s pod %d runs in pool %s, not one of %v", w.ID, pod, n.Pool.Name, w.Pools)
			}
			if w.NodeType != "" && n.Type() != w.NodeType {
				bad("%s pod %d runs on %s of type %q, wants %q", w.ID, pod, n.Name, n.Type(), w.NodeType)
			}
			if !slices.Contains(n.Pods, cluster.PodRef{Workload: w, Pod: pod}) {
				bad("%s pod %d is placed on %s, which does not list it", w.ID, pod, n.Name)
			}
			for q := w.Project; q != nil; q = q.Parent {
				if byQueue[q] == nil {
					byQueue[q] = make([]usage, len(s.Pools))
				}
				u := &byQueue[q][n.Pool.Index]
				u.alloc = u.alloc.Add(at.Held)
				if !w.Priority.Preemptible {
					u.np = u.np.Add(at.Held)
				}
			}
		}
		switch placed := w.PlacedPods(); {
		case placed > 0 && w.Phase != cluster.Running:
			bad("%s holds %d pods but is %s", w.ID, placed, w.Phase)
		case placed == 0 && w.Phase == cluster.Running:
			bad("%s holds no pod but is Running", w.ID)
		}
	}

	for _, p := range s.Pools {
		var total, used cluster.Resources
		for _, n := range p.Nodes {
			var held cluster.Resources
			devUsed := make([]int64, len(n.Devices))
			whole := make([]bool, len(n.Devices))
			shared := make([]int, len(n.Devices))
			for _, ref := range n.Pods {
				at := ref.Workload.Placed[ref.Pod]
				if at.Node != n {
					bad("node %s lists %s pod %d, placed elsewhere", n.Name, ref.Workload.ID, ref.Pod)
					continue
				}
				held = held.Add(at.Held)
				for _, d := range at.Devices {
					devUsed[d] += at.Share
					if at.Share >= cluster.FullDevice {
						whole[d] = true
					} else {
						shared[d]++
					}
				}
			}
			if held != n.Used {
				bad("node %s: Used %v, its pods hold %v", n.Name, n.Used, held)
			}
			for r := cluster.Resource(0); r < cluster.NumResources; r++ {
				if u, c := n.Used.Get(r), n.Capacity.Get(r); u < 0 || u > c {
					bad("node %s: %s used %d of %d", n.Name, r, u, c)
				}
			}
			for i, d := range n.Devices {
				if d.Used < 0 || d.Used > cluster.FullDevice {
					bad("node %s device %d: Used %d milli-GPUs", n.Name, i, d.Used)
				}
				if d.Used != devUsed[i] || d.Whole != whole[i] || d.Shared != shared[i] {
					bad("node %s device %d: Used %d Whole %v Shared %d, its pods make %d %v %d",
						n.Name, i, d.Used, d.Whole, d.Shared, devUsed[i], whole[i], shared[i])
				}
				if d.Whole && d.Shared > 0 {
					bad("node %s device %d is held whole and shared", n.Name, i)
				}
			}
			if n.Ready {
				total = total.Add(n.Capacity)
				used = used.Add(n.Used)
			}
		}
		if total != p.Total || used != p.Used {
			bad("pool %s: Total %v Used %v, its Ready nodes make %v %v", p.Name, p.Total, p.Used, total, used)
		}
		var free []string
		p.AscendFree(0, func(n *cluster.Node) bool { free = append(free, n.Name); return true })
		var ready []*cluster.Node
		for _, n := range p.Nodes {
			if n.Ready {
				ready = append(ready, n)
			}
		}
		slices.SortStableFunc(ready, func(a, b *cluster.Node) int {
			return int(a.Free().GPU - b.Free().GPU)
		})
		var want []string
		for _, n := range ready {
			want = append(want, n.Name)
		}
		if !slices.Equal(free, want) {
			bad("pool %s: the free index walks %v, the nodes by free GPUs are %v", p.Name, free, want)
		}
	}

	for _, d := range s.Departments {
		for _, q := range append([]*cluster.Queue{d}, d.Children...) {
			for _, p := range s.Pools {
				var want usage
				if byQueue[q] != nil {
					want = byQueue[q][p.Index]
				}
				u := q.Usage[p.Index]
				if u.Allocated != want.alloc || u.NonPreemptible != want.np {
					bad("%s %s in %s: Allocated %v NonPreemptible %v, its pods make %v %v",
						q.Kind, q.Name, p.Name, u.Allocated, u.NonPreemptible, want.alloc, want.np)
				}
				quota := q.Quotas[p.Index]
				for r := cluster.Resource(0); r < cluster.NumResources; r++ {
					if l := quota.EffectiveLimit(r); l != cluster.Unlimited && u.Allocated.Get(r) > l {
						bad("%s %s in %s holds %s of %s, above its limit %s", q.Kind, q.Name, p.Name,
							cluster.FormatAmount(r, u.Allocated.Get(r)), r, cluster.FormatAmount(r, l))
					}
					if d := quota.Deserved.Get(r); d != cluster.Unlimited && u.NonPreemptible.Get(r) > d {
						bad("%s %s in %s: non-preemptible work holds %s of %s, above deserved %s", q.Kind, q.Name, p.Name,
							cluster.FormatAmount(r, u.NonPreemptible.Get(r)), r, cluster.FormatAmount(r, d))
					}
				}
			}
		}
	}
	return out
}

// fairShareProblems checks the fair shares a cycle computed: none negative
// or above what the queue can use (its requestable), and siblings that
// deserve no more in all than their parent divides get no more in all.
func fairShareProblems(s *cluster.State) []string {
	var out []string
	for _, p := range s.Pools {
		for r := cluster.Resource(0); r < cluster.NumResources; r++ {
			out = append(out, siblingProblems(p, r, "pool "+p.Name, p.Total.Get(r), s.Departments)...)
			for _, d := range s.Departments {
				out = append(out, siblingProblems(p, r, "department "+d.Name, d.FairShare[p.Index].Get(r), d.Children)...)
			}
		}
	}
	return out
}

func siblingProblems(p *cluster.Pool, r cluster.Resource, parent string, amount int64, qs []*cluster.Queue) []string {
	var out []string
	var sum, deserved int64
	bounded := true
	for _, q := range qs {
		fs := q.FairShare[p.Index].Get(r)
		if req := requestable(p, r, q); fs < 0 || fs > req {
			out = append(out, fmt.Sprintf("%s %s in %s: %s fair share %d, requestable %d", q.Kind, q.Name, p.Name, r, fs, req))
		}
		sum += fs
		if d := q.Quotas[p.Index].Deserved.Get(r); d == cluster.Unlimited {
			bounded = false
		} else {
			deserved += d
		}
	}
	if bounded && deserved <= amount && sum > amount {
		out = append(out, fmt.Sprintf("%s divides %d %s, its children deserve %d and get %d", parent, amount, r, deserved, sum))
	}
	return out
}

// requestable is min(request, limit); a department's request is what its
// projects can use (SCHEDULING.md §1, and fairshare.go's note).
func requestable(p *cluster.Pool, r cluster.Resource, q *cluster.Queue) int64 {
	var req int64
	if q.Kind == cluster.Project {
		req = q.Usage[p.Index].Requested().Get(r)
	} else {
		for _, c := range q.Children {
			req += requestable(p, r, c)
		}
	}
	if l := q.Quotas[p.Index].EffectiveLimit(r); l != cluster.Unlimited {
		req = min(req, l)
	}
	return req
}

// planProblems checks a plan against the state it was computed on: every
// eviction names a running workload and has a rule that allows it.
func planProblems(s *cluster.State, plan scheduling.Plan, cfg scheduling.Config) []string {
	var out []string
	bound := map[string]bool{}
	boundPods := map[string]int{}
	for _, b := range plan.Bindings {
		bound[b.Workload] = true
		boundPods[b.Workload]++
	}
	for _, e := range plan.Evictions {
		v := s.Workload(e.Workload)
		if v == nil || v.PlacedPods() == 0 {
			out = append(out, fmt.Sprintf("eviction of %s, which holds nothing", e.Workload))
			continue
		}
		if e.Reason == "" {
			out = append(out, fmt.Sprintf("eviction of %s has no reason", e.Workload))
		}
		if e.Rule == scheduling.RuleGangMinimum {
			if e.For != "" || v.PlacedPods() >= v.MinPods || v.BelowMinSince < 0 || cfg.Now-v.BelowMinSince < cfg.GangTimeout {
				out = append(out, fmt.Sprintf("gang-minimum eviction of %s (For %q) holding %d of %d pods since %v at %v",
					v.ID, e.For, v.PlacedPods(), v.MinPods, v.BelowMinSince, cfg.Now))
			}
			continue
		}
		j := s.Workload(e.For)
		switch {
		case j == nil:
			out = append(out, fmt.Sprintf("%s eviction of %s for %q, which does not exist", e.Rule, v.ID, e.For))
			continue
		case !bound[j.ID]:
			out = append(out, fmt.Sprintf("%s eviction of %s for %s, which is not placed", e.Rule, v.ID, j.ID))
		case !v.Priority.Preemptible:
			out = append(out, fmt.Sprintf("%s eviction of non-preemptible %s", e.Rule, v.ID))
		}
		switch e.Rule {
		case scheduling.RuleReclaim:
			if v.Project == j.Project {
				out = append(out, fmt.Sprintf("reclaim of %s for %s inside project %s", v.ID, j.ID, j.Project.Name))
			}
		case scheduling.RulePreempt:
			if v.Project != j.Project || v.Priority.Value >= j.Priority.Value {
				out = append(out, fmt.Sprintf("preemption of %s (%s, %s) for %s (%s, %s)",
					v.ID, v.Project.Name, v.Priority.Name, j.ID, j.Project.Name, j.Priority.Name))
			}
		case scheduling.RuleConsolidation:
			if !bound[v.ID] || v.Pool() != j.Pool() && len(j.Pools) == 1 && !slices.Contains(v.Pools, j.Pools[0]) {
				out = append(out, fmt.Sprintf("consolidation moves %s for %s but does not place it again in its pool", v.ID, j.ID))
			}
			// Every moved pod is placed again (a gang whole), and every pod
			// j asked for is placed.
			moved := len(e.Pods)
			if e.Pods == nil {
				moved = v.PlacedPods()
			}
			if boundPods[v.ID] < moved {
				out = append(out, fmt.Sprintf("consolidation moves %d pods of %s for %s and places %d again", moved, v.ID, j.ID, boundPods[v.ID]))
			}
			if asked := j.NextPods(); j.PlacedPods() == 0 && boundPods[j.ID] < asked {
				out = append(out, fmt.Sprintf("consolidation moves %s for %s, which is given %d of the %d pods it asks for", v.ID, j.ID, boundPods[j.ID], asked))
			}
		default:
			out = append(out, fmt.Sprintf("eviction of %s with rule %q", v.ID, e.Rule))
		}
	}
	return out
}

func placedCounts(s *cluster.State) map[*cluster.Workload]int {
	out := map[*cluster.Workload]int{}
	for _, w := range s.Workloads() {
		out[w] = w.PlacedPods()
	}
	return out
}

// gangProblems: a workload that held nothing before a cycle holds nothing or
// at least its minimum after it (all together or not at all).
func gangProblems(s *cluster.State, before map[*cluster.Workload]int) []string {
	var out []string
	for _, w := range s.Workloads() {
		if n := w.PlacedPods(); before[w] == 0 && n > 0 && n < w.MinPods {
			out = append(out, fmt.Sprintf("gang %s was placed %d of its minimum %d pods", w.ID, n, w.MinPods))
		}
	}
	return out
}

// waitingProblems: after Apply, every workload with pods to place has a
// reason in the plan, unless it is an elastic workload that grew in the
// cycle (SCHEDULING.md §6; cycle.go's explain); and Waiting names only
// workloads with pods to place.
func waitingProblems(s *cluster.State, plan scheduling.Plan) []string {
	var out []string
	grew := map[string]bool{}
	for _, b := range plan.Bindings {
		grew[b.Workload] = true
	}
	reasons := map[string][]string{}
	for _, w := range plan.Waiting {
		reasons[w.Workload] = scheduling.Texts(w.Reasons)
		if x := s.Workload(w.Workload); x == nil || !x.Wants() {
			out = append(out, fmt.Sprintf("%s is listed as waiting but has nothing to place", w.Workload))
		}
	}
	for _, w := range s.Workloads() {
		if !w.Wants() || (grew[w.ID] && w.PlacedPods() >= w.MinPods) {
			continue
		}
		rs := reasons[w.ID]
		if len(rs) == 0 || slices.Contains(rs, "") {
			out = append(out, fmt.Sprintf("%s (%d of %d pods, min %d) waits with reasons %q", w.ID, w.PlacedPods(), w.Pods, w.MinPods, rs))
		}
	}
	return out
}

// summary is what a Cycle must leave as it found it: everything but the fair
// shares (and the pending requests they are computed from).
type summary struct {
	Pools     []poolSummary
	Queues    []queueSummary
	Workloads []workloadSummary
	BelowMin  []string
}

type poolSummary struct {
	Name        string
	Total, Used cluster.Resources
	MinMemory   int64
	ByFree      []string
	Nodes       []nodeSummary
}

type nodeSummary struct {
	Name    string
	Ready   bool
	Used    cluster.Resources
	Devices []cluster.Device
	Pods    []string // sorted: see TestCycleKeepsNodePodOrder
}

type queueSummary struct {
	Name             string
	Allocated, NonPr []cluster.Resources
	Waiting, Running []string
}

type workloadSummary struct {
	ID                          string
	Phase                       cluster.Phase
	Seq                         int64
	Preemptions                 int
	BelowMinSince, FirstRunning time.Duration
	Placed                      []string
}

func summarize(s *cluster.State) summary {
	var sum summary
	for _, p := range s.Pools {
		ps := poolSummary{Name: p.Name, Total: p.Total, Used: p.Used, MinMemory: p.MinDeviceMemory}
		p.AscendFree(0, func(n *cluster.Node) bool { ps.ByFree = append(ps.ByFree, n.Name); return true })
		for _, n := range p.Nodes {
			ns := nodeSummary{Name: n.Name, Ready: n.Ready, Used: n.Used, Devices: slices.Clone(n.Devices)}
			for _, ref := range n.Pods {
				ns.Pods = append(ns.Pods, fmt.Sprintf("%s/%d", ref.Workload.ID, ref.Pod))
			}
			slices.Sort(ns.Pods)
			ps.Nodes = append(ps.Nodes, ns)
		}
		sum.Pools = append(sum.Pools, ps)
	}
	for _, d := range s.Departments {
		for _, q := range append([]*cluster.Queue{d}, d.Children...) {
			qs := queueSummary{Name: q.Name}
			for _, u := range q.Usage {
				qs.Allocated = append(qs.Allocated, u.Allocated)
				qs.NonPr = append(qs.NonPr, u.NonPreemptible)
			}
			if q.Kind == cluster.Project {
				qs.Waiting = names(q.Waiting())
				qs.Running = names(q.Running())
			}
			sum.Queues = append(sum.Queues, qs)
		}
	}
	for _, w := range s.Workloads() {
		ws := workloadSummary{ID: w.ID, Phase: w.Phase, Seq: w.Seq, Preemptions: w.Preemptions,
			BelowMinSince: w.BelowMinSince, FirstRunning: w.FirstRunning}
		for pod, at := range w.Placed {
			if at.Node != nil {
				ws.Placed = append(ws.Placed, fmt.Sprintf("%d@%s%v/%d %v", pod, at.Node.Name, at.Devices, at.Share, at.Held))
			}
		}
		sum.Workloads = append(sum.Workloads, ws)
	}
	for _, w := range s.BelowMinimum() {
		sum.BelowMin = append(sum.BelowMin, w.ID)
	}
	return sum
}

func names(set map[*cluster.Workload]struct{}) []string {
	var out []string
	for w := range set {
		out = append(out, w.ID)
	}
	slices.Sort(out)
	return out
}
