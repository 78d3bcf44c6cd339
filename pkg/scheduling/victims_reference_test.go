package scheduling_test

// A differential test of the victim choice (SCHEDULING.md §3 "Reclaim",
// "Preempt", "Which victims"): on small random clusters where one pending
// workload j can only run by evicting, the evictions of the first Cycle are
// compared with a brute-force reference written from the contract. The
// reference enumerates every subset of the candidate units, orders the
// subsets as "Which victims" does (the last group used, then GPUs, then
// workloads sent back to Pending, then workloads touched, then newest), and
// returns the first that makes room, checked by
// evicting it on a fresh build of the same cluster and calling
// placement.Place.
//
// What the reference takes from the scheduler: nothing but the fair shares,
// which it reads from the queues after Cycle (Cycle sets them; fair share is
// tested on its own in fairshare_test.go). Allocations, quotas and placements
// are read from the cluster.State.
//
// The instances ask for GPUs only (whole devices and 0.5 fractions, no CPU or
// memory, quotas in GPUs, one pool), so the only resource "involved" is gpu
// and allocate's sort rules reduce to GPU numbers (see refBefore). Readings
// where the contract is silent follow pkg/scheduling/README.md and are marked
// "README:" below; the one it does not cover ("newest" with elastic units) is
// at compareSets.
//
// The cases it found (a department limit lifted by reclaim, victims needed
// for room under a limit rather than on a node, and the after rule eased by
// victims of the reclaimer's own department) are table cases in
// TestVictimsReferenceCases. A long run:
//
//	go test ./pkg/scheduling/ -run Victims -v -rapid.checks=20000

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
	"github.com/runwayhq/runway/pkg/scheduling"
	"github.com/runwayhq/runway/pkg/scheduling/schedtest"
)

// refSpec is one instance as data, so the reference can build it afresh for
// every set it tries.
type refSpec struct {
	Spread   bool
	Nodes    []refNode
	Depts    []refQueue // none: every project is in the implicit department "default"
	Projects []refQueue
	Victims  []refWorkload // running: every pod placed, in order, with schedtest's On
	J        refWorkload   // pending, submitted last; its ID is "j"
}

type refNode struct {
	Name string
	GPUs int
}

// refQueue is a department or a project; Limit 0 means no limit.
type refQueue struct {
	Name, Dept      string
	Deserved, Limit float64
}

type refWorkload struct {
	Name, Project, Prio string  // Prio: a priority class name
	GPU                 float64 // per pod
	Pods, MinPods       int
	At                  int      // submission time, in seconds
	On                  []string // the node of each pod
}

func (sp refSpec) state() *cluster.State {
	c := schedtest.NewCluster()
	for _, n := range sp.Nodes {
		c.Node(n.Name, n.GPUs)
	}
	limit := func(q refQueue) []schedtest.QuotaOption {
		if q.Limit > 0 {
			return []schedtest.QuotaOption{schedtest.Limit(q.Limit)}
		}
		return nil
	}
	for _, d := range sp.Depts {
		c.Department(d.Name, d.Deserved, limit(d)...)
	}
	for _, p := range sp.Projects {
		c.Project(p.Name, p.Dept, append([]schedtest.QuotaOption{schedtest.Deserved(p.Deserved)}, limit(p)...)...)
	}
	for _, w := range append(slices.Clone(sp.Victims), sp.J) {
		prio, err := cluster.PriorityByName(w.Prio)
		if err != nil {
			panic(err)
		}
		c.Workload(schedtest.W(w.Name).Project(w.Project).GPU(w.GPU).Pods(w.Pods).MinPods(w.MinPods).
			Priority(prio).At(time.Duration(w.At) * time.Second).On(w.On...))
	}
	return c.State()
}

func (sp refSpec) config() scheduling.Config {
	cfg := scheduling.DefaultConfig()
	if sp.Spread {
		cfg.Placement = placement.Spread
	}
	return cfg
}

// GoString prints the instance as a table case literal.
func (sp refSpec) GoString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "refSpec{Spread: %v,\n\tNodes: []refNode{", sp.Spread)
	for i, n := range sp.Nodes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{%q, %d}", n.Name, n.GPUs)
	}
	b.WriteString("},\n")
	queues := func(field string, qs []refQueue) {
		if len(qs) == 0 {
			return
		}
		fmt.Fprintf(&b, "\t%s: []refQueue{", field)
		for i, q := range qs {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{%q, %q, %v, %v}", q.Name, q.Dept, q.Deserved, q.Limit)
		}
		b.WriteString("},\n")
	}
	queues("Depts", sp.Depts)
	queues("Projects", sp.Projects)
	w := func(w refWorkload) string {
		on := "nil"
		if len(w.On) > 0 {
			on = fmt.Sprintf("%#v", w.On)
		}
		return fmt.Sprintf("{%q, %q, %q, %v, %d, %d, %d, %s}", w.Name, w.Project, w.Prio, w.GPU, w.Pods, w.MinPods, w.At, on)
	}
	b.WriteString("\tVictims: []refWorkload{\n")
	for _, v := range sp.Victims {
		fmt.Fprintf(&b, "\t\t%s,\n", w(v))
	}
	fmt.Fprintf(&b, "\t},\n\tJ: refWorkload%s}", w(sp.J))
	return b.String()
}

// refOutcome is the victims evicted for j: the rule ("" for none) and the
// units, each "w" for a whole workload or "w/pod" for one pod above an
// elastic workload's minimum, sorted.
type refOutcome struct {
	Rule  scheduling.Rule
	Units []string
	why   string // the reference's: why nothing is evicted (not compared)
	// retaken (Cycle's): j waits because the room its victims would free
	// would be taken again in the same cycle (pkg/scheduling's "Room taken
	// again", beyond the one decision the reference models).
	retaken bool
}

func (o refOutcome) String() string {
	if o.Rule == "" {
		return "no eviction"
	}
	return fmt.Sprintf("%s %v", o.Rule, o.Units)
}

// cycleOutcome runs the first Cycle and returns its evictions for j, and s
// as Cycle left it (fair shares set). Evictions for a workload that j's
// victims displaced (the cycle's later rounds, see makeRoom) are theirs,
// not j's, and are left out.
func cycleOutcome(sp refSpec) (refOutcome, *cluster.State, error) {
	s := sp.state()
	plan := scheduling.Cycle(s, sp.config())
	var o refOutcome
	displaced := map[string]bool{}
	for _, e := range plan.Evictions {
		if e.Rule == scheduling.RuleConsolidation {
			continue // consolidation moves work when reclaim and preempt found nothing
		}
		if e.For != "j" && displaced[e.For] {
			displaced[e.Workload] = true
			continue
		}
		if e.For != "j" {
			return o, s, fmt.Errorf("eviction of %s for %q under %s; only j waits", e.Workload, e.For, e.Rule)
		}
		displaced[e.Workload] = true
		if o.Rule != "" && o.Rule != e.Rule {
			return o, s, fmt.Errorf("evictions for j under both %s and %s", o.Rule, e.Rule)
		}
		o.Rule = e.Rule
		if e.Pods == nil {
			o.Units = append(o.Units, e.Workload)
		}
		for _, pod := range e.Pods {
			o.Units = append(o.Units, fmt.Sprintf("%s/%d", e.Workload, pod))
		}
	}
	slices.Sort(o.Units)
	if o.Rule != "" && !slices.ContainsFunc(plan.Bindings, func(b scheduling.Binding) bool { return b.Workload == "j" }) {
		return o, s, fmt.Errorf("%s evicted for j, which is not bound", o)
	}
	for _, w := range plan.Waiting {
		o.retaken = o.retaken || w.Workload == "j" && o.Rule == "" &&
			slices.ContainsFunc(w.Reasons, func(r scheduling.Reason) bool { return strings.Contains(r.Text, "taken again in this cycle") })
	}
	return o, s, nil
}

// --- The reference. ---

// refUnit is what one eviction takes (SCHEDULING.md "Which victims").
type refUnit struct {
	id    string
	w     *cluster.Workload
	pods  []int
	gpu   int64 // milli-GPUs held
	group int   // 0 for G1
	// rest: an elastic workload's remaining pods, allowed only in a set
	// holding every extra pod of it.
	rest bool
}

// refUnitsOf: a workload holding no more than its gang minimum is one unit;
// above it, each pod above the minimum is one (README: the pods past the
// first MinPods, in placement order), and its first MinPods pods are one
// more (the rest), with which it is evicted whole.
func refUnitsOf(w *cluster.Workload, group int) []refUnit {
	var pods []int
	for pod, at := range w.Placed {
		if at.Node != nil {
			pods = append(pods, pod)
		}
	}
	slices.SortStableFunc(pods, func(a, b int) int { return cmp.Compare(w.Placed[a].Order, w.Placed[b].Order) })
	if len(pods) <= w.MinPods {
		return []refUnit{{id: w.ID, w: w, pods: pods, gpu: w.Held().GPU, group: group}}
	}
	var out []refUnit
	for _, pod := range pods[w.MinPods:] {
		out = append(out, refUnit{id: fmt.Sprintf("%s/%d", w.ID, pod), w: w, pods: []int{pod}, gpu: w.Placed[pod].Held.GPU, group: group})
	}
	rest := refUnit{id: w.ID, w: w, pods: pods[:w.MinPods], group: group, rest: true}
	for _, pod := range rest.pods {
		rest.gpu += w.Placed[pod].Held.GPU
	}
	return append(out, rest)
}

// refGroups lists the candidate units of queues, in order, one group per
// priority (lowest first) inside each queue; keep picks the workloads.
func refGroups(s *cluster.State, queues []*cluster.Queue, keep func(*cluster.Workload) bool) []refUnit {
	var out []refUnit
	group := 0
	for _, q := range queues {
		var ws []*cluster.Workload
		for _, w := range s.Workloads() {
			if w.Project == q && w.PlacedPods() > 0 && w.Priority.Preemptible && keep(w) {
				ws = append(ws, w)
			}
		}
		slices.SortStableFunc(ws, func(a, b *cluster.Workload) int { return cmp.Compare(a.Priority.Value, b.Priority.Value) })
		for i, w := range ws {
			if i > 0 && w.Priority.Value != ws[i-1].Priority.Value {
				group++
			}
			out = append(out, refUnitsOf(w, group)...)
		}
		if len(ws) > 0 {
			group++
		}
	}
	return out
}

// refSet is a candidate set with what "Which victims" orders it by.
type refSet struct {
	units     []refUnit // newest first: submission time, then name, then the pod placed last
	k         int       // the last group it uses, 1-based
	gpu       int64     // milli-GPUs it frees
	stopped   int       // workloads sent back to Pending
	workloads int       // distinct workloads
	closed    bool      // every rest unit's extra pods are in it
}

func newRefSet(units []refUnit) refSet {
	set := refSet{units: slices.Clone(units)}
	var seen []*cluster.Workload
	for _, u := range units {
		set.k = max(set.k, u.group+1)
		set.gpu += u.gpu
		if !slices.Contains(seen, u.w) {
			seen = append(seen, u.w)
		}
	}
	set.workloads = len(seen)
	set.closed = true
	for _, w := range seen {
		n, rest := 0, false
		for _, u := range units {
			if u.w == w {
				n++
				rest = rest || u.rest
			}
		}
		// A workload at or below its minimum is one unit, evicted whole;
		// above it, the rest stops it and must come with every extra pod.
		switch total := len(refUnitsOf(w, 0)); {
		case total == 1:
			set.stopped++
		case rest:
			set.stopped++
			set.closed = set.closed && n == total
		}
	}
	slices.SortFunc(set.units, func(a, b refUnit) int {
		return cmp.Or(-cmp.Compare(a.w.Submitted, b.w.Submitted), strings.Compare(a.w.ID, b.w.ID), -cmp.Compare(placedAt(a), placedAt(b)))
	})
	return set
}

// placedAt is when a unit's first pod was placed (SCHEDULING.md §4: of two
// units of one workload, the pod placed last is the newer).
func placedAt(u refUnit) int64 { return u.w.Placed[u.pods[0]].Order }

// compareSets is "Which victims": smallest k, then fewest GPUs, then fewest
// workloads sent back to Pending, then fewest workloads touched, then
// newest: submission times compared newest first, then
// names (smallest first). Reading: a set is a set of units, so "newest"
// compares its units one by one, a workload once per unit it gives (Cycle's
// reading too; comparing distinct workloads instead is another, see the
// table case "newest compares units"). README: among units of one elastic
// workload, the pod placed last goes first.
func compareSets(a, b refSet) int {
	if c := cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.gpu, b.gpu), cmp.Compare(a.stopped, b.stopped),
		cmp.Compare(a.workloads, b.workloads)); c != 0 {
		return c
	}
	n := min(len(a.units), len(b.units))
	for i := range n {
		if c := -cmp.Compare(a.units[i].w.Submitted, b.units[i].w.Submitted); c != 0 {
			return c
		}
	}
	for i := range n {
		ua, ub := a.units[i], b.units[i]
		if c := cmp.Or(strings.Compare(ua.w.ID, ub.w.ID), -cmp.Compare(placedAt(ua), placedAt(ub))); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a.units), len(b.units))
}

// refBest returns the first subset of units, in the order of compareSets,
// for which ok holds; nil when none does.
func refBest(units []refUnit, ok func(refSet) bool) *refSet {
	var sets []refSet
	for mask := 1; mask < 1<<len(units); mask++ {
		var set []refUnit
		for i, u := range units {
			if mask&(1<<i) != 0 {
				set = append(set, u)
			}
		}
		if set := newRefSet(set); set.closed {
			sets = append(sets, set)
		}
	}
	slices.SortStableFunc(sets, compareSets)
	for _, set := range sets {
		if ok(set) {
			return &set
		}
	}
	return nil
}

// refChecks are allocate's checks for j in s: the project and each ancestor
// stay within their limit; a non-preemptible j keeps their non-preemptible
// allocation within deserved (refNonPreemptibleOK, also part of the gate).
func refChecks(s *cluster.State, j *cluster.Workload, req int64) bool {
	for q := j.Project; q != nil; q = q.Parent {
		if l := q.Quotas[0].EffectiveLimit(cluster.GPU); l != cluster.Unlimited && refAlloc(q)+req > l {
			return false
		}
	}
	return refNonPreemptibleOK(j, req)
}

func refNonPreemptibleOK(j *cluster.Workload, req int64) bool {
	for q := j.Project; q != nil && !j.Priority.Preemptible; q = q.Parent {
		if d := refDeserved(q); d != cluster.Unlimited && q.Usage[0].NonPreemptible.GPU+req > d {
			return false
		}
	}
	return true
}

// refMakesRoom evicts set on a fresh build of the cluster and reports
// whether j then passes allocate's checks and is placed.
func refMakesRoom(sp refSpec, set []refUnit) bool {
	s := sp.state()
	for _, u := range set {
		for _, pod := range u.pods {
			s.Unplace(s.Workload(u.w.ID), pod)
		}
	}
	j := s.Workload("j")
	if !refChecks(s, j, j.Pod.GPU*int64(j.Pods)) {
		return false
	}
	pods, _ := placement.Place(s, s.Pool("default"), j, j.Pods, sp.config().Placement)
	return pods != nil
}

// The numbers the rules read, in GPUs (milli), in the one pool.
func refAlloc(q *cluster.Queue) int64    { return q.Usage[0].Allocated.GPU }
func refFair(q *cluster.Queue) int64     { return q.FairShare[0].GPU }
func refDeserved(q *cluster.Queue) int64 { return q.Quotas[0].Deserved.GPU }

// refCeiling is max(deserved, fair share) capped by limit; with deserved
// unlimited, the limit if one is set, otherwise the pool total (§1
// "Unlimited").
func refCeiling(s *cluster.State, q *cluster.Queue, r cluster.Resource) int64 {
	quota := q.Quotas[0]
	d, l := quota.Deserved.Get(r), quota.EffectiveLimit(r)
	switch {
	case d == cluster.Unlimited && l != cluster.Unlimited:
		return l
	case d == cluster.Unlimited:
		return s.Pools[0].Total.Get(r)
	case l != cluster.Unlimited:
		return min(max(d, q.FairShare[0].Get(r)), l)
	}
	return max(d, q.FairShare[0].Get(r))
}

// refBefore is allocate's sort of sibling queues (§3 rules 1–6) with no
// head request, which is how victim queues are ordered (README: "Victim
// queue order is allocate's order computed with no head request"). Rule 4
// is then rule 3 again. The instances hold GPUs only: cpu and memory are 0
// everywhere, so rule 1 never applies (README: a resource a queue neither
// holds nor is given does not count as above), rule 2 and 3 read GPUs only,
// and rule 5's cpu and memory ceilings are the pool total for every queue.
func refBefore(s *cluster.State, a, b *cluster.Queue) bool {
	above := func(q *cluster.Queue) bool { // rule 1
		for r := cluster.Resource(0); r < cluster.NumResources; r++ {
			if q.Usage[0].Allocated.Get(r) <= q.FairShare[0].Get(r) {
				return false
			}
		}
		return true
	}
	if above(a) != above(b) {
		return above(b)
	}
	within := func(q *cluster.Queue) bool { // rule 2
		return refDeserved(q) == cluster.Unlimited || refAlloc(q) <= refDeserved(q)
	}
	if within(a) != within(b) {
		return within(a)
	}
	share := func(q *cluster.Queue) (zero bool, share float64) { // rule 3
		switch c := refCeiling(s, q, cluster.GPU); {
		case refAlloc(q) == 0:
			return false, 0
		case c == 0:
			return true, float64(refAlloc(q)) // 1000 × whole GPUs
		default:
			return false, float64(refAlloc(q)) / float64(c)
		}
	}
	za, sa := share(a)
	zb, sb := share(b)
	if za != zb {
		return zb
	}
	if sa != sb {
		return sa < sb
	}
	if ca, cb := refCeiling(s, a, cluster.GPU), refCeiling(s, b, cluster.GPU); ca != cb { // rule 5
		return ca < cb
	}
	if a.Order != b.Order { // rule 6
		return a.Order < b.Order
	}
	return a.Name < b.Name
}

// refVictimQueues lists the projects other than q in the reverse of
// allocate's order: the department allocate would serve last first, then
// its projects the same way.
func refVictimQueues(s *cluster.State, q *cluster.Queue) []*cluster.Queue {
	sorted := func(qs []*cluster.Queue) []*cluster.Queue {
		out := slices.Clone(qs)
		slices.SortStableFunc(out, func(a, b *cluster.Queue) int {
			switch {
			case refBefore(s, a, b):
				return -1
			case refBefore(s, b, a):
				return 1
			}
			return 0
		})
		slices.Reverse(out)
		return out
	}
	var out []*cluster.Queue
	for _, d := range sorted(s.Departments) {
		for _, p := range sorted(d.Children) {
			if p != q {
				out = append(out, p)
			}
		}
	}
	return out
}

// refMeet returns where the branches of q and v meet: A on q's side, B on
// v's: the projects in one department, otherwise their departments.
func refMeet(q, v *cluster.Queue) (a, b *cluster.Queue) {
	if q.Parent == v.Parent {
		return q, v
	}
	return q.Parent, v.Parent
}

// refReclaimRules: every unit passes the per-victim rule (one queue B's
// victims in increasing GPUs, each seeing the earlier ones removed) and the
// after rule holds at every level from j's project up.
func refReclaimRules(s *cluster.State, j *cluster.Workload, req int64, set refSet) bool {
	q := j.Project
	byB := map[*cluster.Queue][]refUnit{}
	for _, u := range set.units {
		_, b := refMeet(q, u.w.Project)
		byB[b] = append(byB[b], u)
	}
	for b, units := range byB {
		a, _ := refMeet(q, units[0].w.Project)
		slices.SortStableFunc(units, func(x, y refUnit) int { return cmp.Compare(x.gpu, y.gpu) })
		held := refAlloc(b)
		for _, u := range units {
			// B above max(deserved, fair share) capped by limit (never, with
			// deserved unlimited); or A within deserved with j added and B
			// above deserved.
			d := refDeserved(b)
			aWithin := refDeserved(a) == cluster.Unlimited || refAlloc(a)+req <= refDeserved(a)
			if !(d != cluster.Unlimited && held > refCeiling(s, b, cluster.GPU) || aWithin && d != cluster.Unlimited && held > d) {
				return false
			}
			held -= u.gpu
		}
	}

	lost := map[*cluster.Queue]int64{}
	for _, u := range set.units {
		for v := u.w.Project; v != nil; v = v.Parent {
			lost[v] += u.gpu
		}
	}
	for x := q; x != nil; x = x.Parent {
		siblings := s.Departments
		if x.Parent != nil {
			siblings = x.Parent.Children
		}
		ax, fx := refAlloc(x)-lost[x]+req, refFair(x)
		for _, sib := range siblings {
			if sib == x || lost[sib] == 0 {
				continue
			}
			as, fs := refAlloc(sib)-lost[sib], refFair(sib)
			// Fair share 0 on S's side skips S (README: unless X's is 0 too).
			if fs == 0 && fx > 0 {
				continue
			}
			// ax/fx > 1 and ax/fx >= as/fs, fx = 0 counting as infinite.
			if fx == 0 || ax > fx && ax*fs >= as*fx {
				return false
			}
		}
	}
	return true
}

// refVictims is SCHEDULING.md's answer for j in the first cycle; s is the
// state Cycle ran on (its fair shares set by Cycle).
func refVictims(sp refSpec, s *cluster.State) refOutcome {
	j := s.Workload("j")
	q := j.Project
	req := j.Pod.GPU * int64(j.Pods)
	outcome := func(rule scheduling.Rule, set *refSet) refOutcome {
		o := refOutcome{Rule: rule}
		for _, u := range set.units {
			// A workload evicted whole is named alone, as Cycle's
			// eviction of it is.
			if !slices.ContainsFunc(set.units, func(r refUnit) bool { return r.rest && r.w == u.w }) || u.rest {
				o.Units = append(o.Units, u.id)
			}
		}
		slices.Sort(o.Units)
		return o
	}
	if refMakesRoom(sp, nil) {
		return refOutcome{why: "allocate places j"}
	}
	why := "the reclaim gate fails"
	// Reclaim: the gate, then victims of other projects.
	if refAlloc(q)+req <= refFair(q) && refNonPreemptibleOK(j, req) {
		why = "no set makes room"
		units := refGroups(s, refVictimQueues(s, q), func(*cluster.Workload) bool { return true })
		if set := refBest(units, func(set refSet) bool {
			return refReclaimRules(s, j, req, set) && refMakesRoom(sp, set.units)
		}); set != nil {
			return outcome(scheduling.RuleReclaim, set)
		}
	}
	// Preempt: strictly lower priorities of j's own project.
	units := refGroups(s, []*cluster.Queue{q}, func(w *cluster.Workload) bool { return w.Priority.Value < j.Priority.Value })
	if set := refBest(units, func(set refSet) bool { return refSettles(s, j, req, set) && refMakesRoom(sp, set.units) }); set != nil {
		return outcome(scheduling.RulePreempt, set)
	}
	return refOutcome{why: why}
}

// refSettles is preempt's settling rule: with j placed and the set evicted,
// neither j's project nor an ancestor ends above max(deserved, fair share)
// where it was within it (never above it with deserved unlimited).
func refSettles(s *cluster.State, j *cluster.Workload, req int64, set refSet) bool {
	var freed int64
	for _, u := range set.units {
		freed += u.gpu
	}
	for q := j.Project; q != nil; q = q.Parent {
		c := refCeiling(s, q, cluster.GPU)
		if refDeserved(q) != cluster.Unlimited && refAlloc(q) <= c && refAlloc(q)-freed+req > c {
			return false
		}
	}
	return true
}

// refDiff compares Cycle with the reference on one instance.
func refDiff(sp refSpec) (got, want refOutcome, s *cluster.State, problem string) {
	got, s, err := cycleOutcome(sp)
	if err != nil {
		return got, want, s, err.Error()
	}
	want = refVictims(sp, s)
	if got.retaken && want.Rule != "" {
		return got, want, s, "" // counted apart, and bounded, by the callers
	}
	if !slices.Equal(got.Units, want.Units) || got.Rule != want.Rule {
		return got, want, s, fmt.Sprintf("Cycle evicts %s for j; SCHEDULING.md: %s", got, want)
	}
	return got, want, s, ""
}

// refRetaken counts the instances where Cycle lets j wait because the room
// the reference's victims free would be taken again in the same cycle.
const refRetaken = "room taken again in the cycle"

// refRetakenRare fails when the instances where j waits for its room being
// taken again are more than a few: they are not compared with the
// reference, so they must stay the exception.
func refRetakenRare(t *testing.T, n, total int) {
	t.Helper()
	if total > 0 && float64(n)/float64(total) > 0.05 {
		t.Errorf("%s in %d of %d instances, want at most 5%%: those are not compared with the reference", refRetaken, n, total)
	}
}

// TestVictimsMatchReference is the differential test: on each random
// instance, the first Cycle evicts for j exactly the units the reference
// chooses, under the same rule, or nothing when the reference finds no set.
func TestVictimsMatchReference(t *testing.T) {
	counts := map[string]int{}
	rapid.Check(t, func(t *rapid.T) {
		sp := refDraw(t, refSmall)
		got, want, _, problem := refDiff(sp)
		kind := want.why
		if want.Rule != "" {
			kind = fmt.Sprintf("%s of %d units", want.Rule, len(want.Units))
		}
		if got.retaken {
			kind = refRetaken
		}
		if problem != "" {
			t.Fatalf("%s\n%#v", problem, sp)
		}
		counts[kind]++
	})
	t.Logf("instances by the reference's outcome: %v", counts)
	// The draws must keep meeting every kind of instance, or the comparison
	// says little: j placed without victims, the gate closed, no set found,
	// and reclaim with victims (about a quarter each at 150 instances).
	total, reclaims := 0, 0
	for kind, n := range counts {
		total += n
		if strings.HasPrefix(kind, string(scheduling.RuleReclaim)+" of ") {
			reclaims += n
		}
	}
	for _, c := range []struct {
		what string
		n    int
		min  float64
	}{
		{"reclaims with victims", reclaims, 0.10},
		{"instances where no set makes room", counts["no set makes room"], 0.05},
		{"instances where the reclaim gate fails", counts["the reclaim gate fails"], 0.05},
		{"instances allocate places without victims", counts["allocate places j"], 0.05},
	} {
		if share := float64(c.n) / float64(total); share < c.min {
			t.Errorf("%s: %d of %d instances (%.0f%%), want at least %.0f%%", c.what, c.n, total, 100*share, 100*c.min)
		}
	}
	refRetakenRare(t, counts[refRetaken], total)
	if counts["allocate places j"] > total/2 {
		t.Errorf("allocate places j without victims in %d of %d instances: the draws miss the victim search", counts["allocate places j"], total)
	}
}
