package scheduling

import (
	"container/heap"
	"math/bits"
	"slices"
	"sort"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
)

// unit is what an eviction takes (SCHEDULING.md §3 "Which victims"): a whole
// workload holding no more than its gang minimum, or one pod above an elastic
// workload's minimum, or (rest) the pods of an elastic workload's minimum,
// which a set may hold only with every extra pod of that workload.
type unit struct {
	w     *cluster.Workload
	pods  []int
	held  cluster.Resources
	group int // index of its victim group (G1 = 0)
	// rest: the elastic workload's remaining pods; stops: evicting the unit
	// sends its workload back to Pending (a whole workload, or rest).
	rest, stops bool
	// node is where a one-pod unit runs: read in place of w.Placed, which a
	// reclaim storm's searches would fetch from all over memory.
	node *cluster.Node
	// rank is its place in its queue's candidate list: with group, the
	// order of units in a search.
	rank int
}

// unitsOf splits a running workload into units. Pods above the minimum go one
// at a time, the last placed first; a workload at or below its minimum is one
// unit. (While it holds pods above its minimum, it is not offered whole: its
// extra pods go first.)
func unitsOf(w *cluster.Workload) []unit {
	pods := placedPods(w)
	if len(pods) <= w.MinPods {
		u := unit{w: w, pods: pods, held: w.Held(), stops: true}
		if len(pods) == 1 {
			u.node = w.Placed[pods[0]].Node
		}
		return []unit{u}
	}
	var out []unit
	for i := len(pods) - 1; i >= w.MinPods; i-- {
		out = append(out, unit{w: w, pods: []int{pods[i]}, held: w.Placed[pods[i]].Held, node: w.Placed[pods[i]].Node})
	}
	return out
}

// victimUnitsOf is unitsOf for reclaim and preempt: an elastic workload above
// its minimum also offers its remaining pods as one more unit, after its
// extra pods, so that it can be evicted whole.
func victimUnitsOf(w *cluster.Workload) []unit {
	us := unitsOf(w)
	if len(us) == 1 && us[0].stops || w.MinPods == 0 {
		return us
	}
	pods := placedPods(w)[:w.MinPods]
	r := unit{w: w, pods: pods, rest: true, stops: true}
	for _, pod := range pods {
		r.held = r.held.Add(w.Placed[pod].Held)
	}
	if len(pods) == 1 {
		r.node = w.Placed[pods[0]].Node
	}
	return append(us, r)
}

// closed reports whether set holds, with each rest unit, every extra pod of
// its workload (the only sets "Which victims" allows).
func (sr *search) closed(set []int) bool {
	for _, i := range set {
		r := &sr.units[i]
		if !r.rest {
			continue
		}
		extras := 0
		for _, k := range set {
			if u := &sr.units[k]; u.w == r.w && !u.rest {
				extras++
			}
		}
		if extras != r.w.PlacedPods()-len(r.pods) {
			return false
		}
	}
	return true
}

// close adds to set the extra pods of the workload of each rest unit in it,
// keeping set in units' order (group, then rank).
func (sr *search) close(set []int) []int {
	var add []int
	for _, i := range set {
		r := &sr.units[i]
		if !r.rest {
			continue
		}
		for k := range sr.units {
			if u := &sr.units[k]; u.w == r.w && !u.rest && !slices.Contains(set, k) && !slices.Contains(add, k) {
				add = append(add, k)
			}
		}
	}
	if len(add) == 0 {
		return set
	}
	set = append(set, add...)
	sort.Slice(set, func(a, b int) bool {
		ua, ub := &sr.units[set[a]], &sr.units[set[b]]
		if ua.group != ub.group {
			return ua.group < ub.group
		}
		return ua.rank < ub.rank
	})
	return set
}

// evictions turns a chosen set into what is evicted: a rest unit and the
// extra pods beside it are one eviction of the whole workload.
func evictions(units []unit, set []int) []unit {
	var out []unit
	for _, i := range set {
		u := units[i]
		if !u.rest {
			whole := slices.ContainsFunc(set, func(k int) bool { return units[k].rest && units[k].w == u.w })
			if !whole {
				out = append(out, u)
			}
			continue
		}
		all := unit{w: u.w, pods: placedPods(u.w), held: u.w.Held(), group: u.group, stops: true}
		out = append(out, all)
	}
	return out
}

// room is the outcome of trying a victim set.
type room int

const (
	roomMade  room = iota // J placed, every rule holds
	roomNoFit             // J does not fit or fails allocate's checks: more victims may help
	roomRules             // a reclaim rule fails: more victims cannot help
)

// search finds the least disruptive set of units that makes room for j.
type search struct {
	c    *cycle
	j    *cluster.Workload
	pool *cluster.Pool
	// units are the candidates pulled so far, group by group; groups and
	// starts hold the end and start index of each group in units (a
	// deferred group's range is empty, see victimfeed.go).
	units  []unit
	groups []int
	starts []int
	feed   feed
	id     int // the search's number in the cycle, from 1
	// lazy: findForPod defers vain groups (see victimfeed.go).
	lazy     bool
	deferred []deferredGroup
	resolved map[*cluster.Node]int  // per node, the deferred groups already in its list
	lazyAt   map[cluster.PodRef]int // a deferred unit's index in units, by its first pod
	rules    func(set []int) bool   // reclaim's per-victim and after rules; nil for preempt
	// rulesNotMonotone: a set failing rules may have a superset passing them.
	rulesNotMonotone bool
	exact            bool // search every set, even for one pod
	// rulesGrow: the rules only get easier with more victims (preempt's
	// settling rule), so greedy keeps them while it drops units.
	rulesGrow bool
	// deadAlone, when set, reports a unit that fails the rules on its own in
	// a way more victims cannot mend unless a unit that helps joins them
	// (reclaim's after rule); findForPod then skips the sets it would try in
	// vain: most of a reclaim storm's. helping counts the units pulled that
	// help.
	deadAlone, helps func(u *unit) bool
	helping          int
	budget           int
	// minGroup is the first group (0-based) a set must reach to be worth
	// trying: fewer groups cannot make room.
	minGroup int
	pulled   int // groups findForPod has searched
}

// index adds the units from..to (excluded) of group g to byNode, each once
// per node it runs on, and appends to touched the nodes where one of them is
// the first unit of g.
func (sr *search) index(byNode map[*cluster.Node][]int, touched []*cluster.Node, from, to, g int) (map[*cluster.Node][]int, []*cluster.Node) {
	add := func(n *cluster.Node, i int) {
		l := byNode[n]
		if len(l) > 0 && l[len(l)-1] == i {
			return // another pod of the same unit
		}
		if len(l) == 0 || sr.units[l[len(l)-1]].group != g {
			touched = append(touched, n)
		}
		byNode[n] = append(l, i)
	}
	for i := from; i < to; i++ {
		u := &sr.units[i]
		if u.node != nil {
			add(u.node, i)
			continue
		}
		for _, pod := range u.pods {
			add(u.w.Placed[pod].Node, i)
		}
	}
	return byNode, touched
}

// vain reports whether every set of units holding one of group g or later
// fails the rules: no unit of them helps, and each of g or later is dead
// alone.
func (sr *search) vain(units []int, g int) bool {
	if sr.deadAlone == nil {
		return false
	}
	for _, i := range units {
		if sr.helps(&sr.units[i]) {
			return false
		}
	}
	for _, i := range units {
		if sr.units[i].group >= g && !sr.deadAlone(&sr.units[i]) {
			return false
		}
	}
	return true
}

// try evicts set, checks the rules and places j; keep leaves it all in place
// when room is made, otherwise the state is rolled back.
func (sr *search) try(set []int, keep bool) room {
	sr.budget--
	if !sr.closed(set) {
		return roomNoFit // a rest unit wants its workload's extra pods too
	}
	if sr.rules != nil && !sr.rules(set) {
		return roomRules
	}
	// Cheap bound first: the pool's free GPUs plus what the set frees must
	// cover what j asks for before any placement is worth trying.
	var freed int64
	for _, i := range set {
		freed += sr.units[i].held.GPU
	}
	if sr.pool.Free().GPU+freed < request(sr.j, sr.pool).GPU {
		return roomNoFit
	}
	mark := sr.c.s.Mark()
	for _, i := range set {
		for _, pod := range sr.units[i].pods {
			sr.c.s.Unplace(sr.units[i].w, pod)
		}
	}
	ok := checkQuota(sr.j, sr.pool, request(sr.j, sr.pool)).Check == 0
	if ok {
		pods, _ := placement.Place(sr.c.s, sr.pool, sr.j, sr.j.NextPods(), sr.c.cfg.Placement)
		ok = pods != nil
	}
	if !ok || !keep {
		sr.c.s.Rollback(mark)
	}
	if ok {
		return roomMade
	}
	return roomNoFit
}

// find returns the chosen set (indexes into units), or nil.
//
// "The smallest k for which G1 ... Gk holds a set that makes room, then the
// least disruptive set within them" is one order on sets: by the last group a
// set uses, then fewest GPUs, fewest workloads sent back to Pending, fewest
// workloads touched, newest. Adding a unit never
// lowers that key, so the search walks sets in this order and stops at the
// first that makes room.
func (sr *search) find() []int {
	// The per-node search looks for room on a node only: it is exact when j
	// already passes allocate's checks (victims are needed for room, not to
	// lift a limit) and more victims never help the rules.
	if sr.j.NextPods() == 1 && !sr.exact && checkQuota(sr.j, sr.pool, request(sr.j, sr.pool)).Check == 0 {
		return sr.findForPod()
	}
	for sr.pull() {
	}
	m := len(sr.groups)
	if m == 0 {
		return nil
	}
	// Sets within fewer groups than the first k whose groups together could
	// make room (ignoring the rules) need not be tried.
	lo := sr.firstFeasibleGroup()
	if lo == 0 {
		return nil
	}
	sr.minGroup = lo - 1
	cand := seq(len(sr.units))
	if len(cand) <= exactGangUnits {
		if set, done := sr.bestFirst(cand); done {
			return set
		}
	}
	return sr.greedyFrom(lo)
}

// greedyFrom is the fallback past the budget, or for a gang with many
// candidates: the first k whose greedy set makes room, pruned to a minimal
// one (no unit can be dropped). Each greedy set costs a placement per unit,
// so only the first few k are tried, then the last, which offers every
// candidate.
func (sr *search) greedyFrom(lo int) []int {
	sr.materialize()
	for sr.pull() {
	}
	for _, k := range greedySteps(lo, len(sr.groups)) {
		if sr.budget <= 0 {
			break
		}
		if set := sr.greedy(seq(sr.groups[k-1])); set != nil {
			return set
		}
	}
	return nil
}

// findForPod searches for a single pod, pulling groups one at a time. A pod
// can only use room on one node, so the sets worth trying are, node by node,
// the minimal subsets of that node's units after which it fits (a superset is
// never cheaper, and the rules only get harder with more victims). When group
// g arrives, only nodes it touches can have new such sets, and each of those
// sets contains a unit of g: all of them come before any set reaching g+1.
func (sr *search) findForPod() []int {
	byNode := sr.c.scratch.nodes()
	feasible, complete := false, true
	sr.lazy = true
	for sr.pull() {
		for g := sr.minGroupPulled(); g < len(sr.groups); g++ {
			start, end := sr.starts[g], sr.groups[g]
			if start == end {
				// Deferred: every new set holds a unit of g, and nothing
				// pulled helps. Its units join byNode on the nodes a later
				// group touches (resolve).
				continue
			}
			if sr.helps != nil && sr.helps(&sr.units[start]) {
				sr.helping += end - start // a group is one queue's
			}
			var touched []*cluster.Node
			byNode, touched = sr.index(byNode, touched, start, end, g)
			// Each node first enters the heap as a bound on its sets (see
			// nodeBound): its sets are built only when it comes first, so
			// nodes that only offer dearer sets than the one chosen are
			// never enumerated, nor their deferred units resolved.
			h := &setHeap{units: sr.units, items: sr.c.scratch.items[:0]}
			for _, n := range touched {
				if n.Ready && placement.Eligible(sr.c.s, n, sr.j) {
					h.pushBound(sr.nodeBound(n, byNode[n], g))
				}
			}
			sr.c.scratch.items = h.items[:0]
			for h.Len() > 0 && sr.budget > 0 {
				e := heap.Pop(h).(candidate)
				if e.node == nil {
					if sr.try(e.set, false) == roomMade {
						return e.set
					}
					continue
				}
				n := e.node
				sr.resolve(byNode, n)
				h.units = sr.units
				if !sr.fitsAfter(n, byNode[n]) {
					continue
				}
				if !feasible {
					feasible, sr.minGroup = true, g
				}
				for _, space := range sr.spaces(n, byNode[n]) {
					if len(space) > maxUnitsPerNode {
						complete = false
						continue
					}
					if sr.vain(space, g) {
						continue
					}
					for _, set := range sr.minimalSets(n, space) {
						if sr.units[set[len(set)-1]].group == g && !sr.vain(set, 0) {
							h.push(candidate{set: set})
						}
					}
				}
			}
			if sr.budget <= 0 {
				return sr.greedyFrom(sr.minGroup + 1)
			}
		}
		sr.pulled = len(sr.groups)
	}
	if feasible && !complete {
		return sr.greedyFrom(sr.minGroup + 1)
	}
	return nil
}

// nodeBound bounds the sets findForPod builds on n for group g, each of
// which holds a unit of g (the last units of n's list): each frees at least
// what j's pod lacks there and what the smallest of them holds, and one of
// a single workload is one of g's there, so it comes no earlier than the
// newest of them.
func (sr *search) nodeBound(n *cluster.Node, units []int, g int) candidate {
	e := candidate{node: n, maxGroup: g, gpu: -1}
	for k := len(units) - 1; k >= 0 && sr.units[units[k]].group == g; k-- {
		u := &sr.units[units[k]]
		if e.gpu < 0 || u.held.GPU < e.gpu {
			e.gpu = u.held.GPU
		}
		if e.newestBound == nil || newerWorkload(u.w, e.newestBound) {
			e.newestBound = u.w
		}
	}
	e.gpu = max(e.gpu, sr.j.Widest().Counted(n.Pool.MinDeviceMemory).GPU-n.Free().GPU)
	return e
}

// minGroupPulled is the first group not yet searched by findForPod.
func (sr *search) minGroupPulled() int { return sr.pulled }

// greedyGroups is how many k from the first feasible one greedy tries.
const greedyGroups = 3

func greedySteps(lo, m int) []int {
	var ks []int
	for k := lo; k <= m && k < lo+greedyGroups; k++ {
		ks = append(ks, k)
	}
	if last := ks[len(ks)-1]; last < m {
		ks = append(ks, m)
	}
	return ks
}

// firstFeasibleGroup returns the smallest k (1-based) for which evicting all
// of G1..Gk lets j's gang be placed, or 0 when even all groups do not.
// Placement only grows with more victims, so k is bisected.
func (sr *search) firstFeasibleGroup() int {
	groups := sr.groups
	m := len(groups)
	if !sr.placeable(seq(groups[m-1])) {
		return 0
	}
	lo, hi := 1, m
	for lo < hi {
		mid := (lo + hi) / 2
		if sr.placeable(seq(groups[mid-1])) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

func (sr *search) placeable(set []int) bool {
	rules := sr.rules
	sr.rules = nil
	defer func() { sr.rules = rules }()
	return sr.try(set, false) == roomMade
}

// exactGangUnits is the most candidate units for which a gang's victim sets
// are searched exhaustively; past it the search is greedy (2^12 sets at most).
const exactGangUnits = 12

// maxUnitsPerNode bounds the exact per-node enumeration (2^12 subsets).
const maxUnitsPerNode = 12

// spaces splits a node's units into the groups of units worth enumerating
// together: all of them, or, on a node with too many to enumerate and a pod
// that needs at most one device, the units on each device (only one device
// has to be freed; cpu and memory are then checked as usual).
func (sr *search) spaces(n *cluster.Node, units []int) [][]int {
	if len(units) <= maxUnitsPerNode || sr.j.Widest().Devices() > 1 {
		return [][]int{units}
	}
	var out [][]int
	for d := range n.Devices {
		var space []int
		for _, i := range units {
			if sr.units[i].holds(n, d) {
				space = append(space, i)
			}
		}
		if len(space) > 0 && sr.fitsAfter(n, space) {
			out = append(out, space)
		}
	}
	return out
}

// holds reports whether the unit has a pod on device d of n.
func (u unit) holds(n *cluster.Node, d int) bool {
	for _, pod := range u.pods {
		at := u.w.Placed[pod]
		if at.Node == n && slices.Contains(at.Devices, d) {
			return true
		}
	}
	return false
}

// minimalSets lists the subsets of units (all with a pod on n) after whose
// eviction j's pod fits on n, and of which no proper subset fits.
func (sr *search) minimalSets(n *cluster.Node, units []int) [][]int {
	need := sr.j.Widest().Counted(n.Pool.MinDeviceMemory).GPU - n.Free().GPU
	var fitting []uint32
	var out [][]int
	k := len(units)
	// Walk masks by size (Gosper's hack gives the next mask of the same
	// size), so every subset of a mask is seen before it.
	for size := 1; size <= k; size++ {
		for mask := uint32(1)<<size - 1; mask < uint32(1)<<k; mask = nextCombination(mask) {
			if coveredBy(mask, fitting) {
				continue
			}
			var gpu int64
			for m := mask; m != 0; m &= m - 1 {
				gpu += sr.units[units[bits.TrailingZeros32(m)]].held.GPU
			}
			if gpu < need {
				continue
			}
			set := make([]int, 0, size)
			for m := mask; m != 0; m &= m - 1 {
				set = append(set, units[bits.TrailingZeros32(m)])
			}
			set = sr.close(set)
			if !sr.fitsAfter(n, set) {
				continue
			}
			fitting = append(fitting, mask)
			out = append(out, set)
		}
	}
	return out
}

// nextCombination returns the next larger mask with as many bits set.
func nextCombination(mask uint32) uint32 {
	c := mask & -mask
	r := mask + c
	return (((r ^ mask) >> 2) / c) | r
}

// coveredBy reports whether some fitting mask is a subset of mask.
func coveredBy(mask uint32, fitting []uint32) bool {
	for _, f := range fitting {
		if f&mask == f {
			return true
		}
	}
	return false
}

// fitsAfter reports whether j's next pod would fit on n once the set's pods
// there are gone: device arithmetic only, the state is not touched.
func (sr *search) fitsAfter(n *cluster.Node, set []int) bool {
	var usedBuf [16]int64
	var wholeBuf [16]bool
	used, whole := usedBuf[:0], wholeBuf[:0]
	if len(n.Devices) > len(usedBuf) {
		used, whole = make([]int64, 0, len(n.Devices)), make([]bool, 0, len(n.Devices))
	}
	used, whole = used[:len(n.Devices)], whole[:len(n.Devices)]
	free := sr.freeAfter(n, set, used, whole)
	req := sr.j.Widest()
	if free.CPU < req.CPU || free.Memory < req.Memory {
		return false
	}
	if req.Shares() {
		for d := range used {
			if !whole[d] && cluster.FullDevice-used[d] >= req.ShareOn(n.Devices[d].Memory) {
				return true
			}
		}
		return false
	}
	idle := 0
	for d := range used {
		if used[d] == 0 {
			idle++
		}
	}
	return idle >= req.Devices()
}

// freeAfter is what n would have free once the set's pods there are gone;
// used and whole (one entry per device) receive what its devices would hold.
func (sr *search) freeAfter(n *cluster.Node, set []int, used []int64, whole []bool) cluster.Resources {
	free := n.Free()
	for d := range n.Devices {
		used[d], whole[d] = n.Devices[d].Used, n.Devices[d].Whole
	}
	for _, i := range set {
		u := sr.units[i]
		for _, pod := range u.pods {
			at := u.w.Placed[pod]
			if at.Node != n {
				continue
			}
			free = free.Add(at.Held)
			for _, d := range at.Devices {
				used[d] -= at.Share
				if at.Share >= cluster.FullDevice {
					whole[d] = false
				}
			}
		}
	}
	return free
}

// bestFirst enumerates the non-empty subsets of cand in the order of lessSet
// and returns the first that makes room. done is false when the budget ran
// out before the answer was known.
func (sr *search) bestFirst(cand []int) ([]int, bool) {
	h := &setHeap{units: sr.units}
	for pos := range cand {
		h.push(candidate{pos: pos, set: []int{cand[pos]}})
	}
	for h.Len() > 0 {
		if sr.budget <= 0 {
			return nil, false
		}
		e := heap.Pop(h).(candidate)
		if e.maxGroup >= sr.minGroup {
			switch sr.try(e.set, false) {
			case roomMade:
				return e.set, true
			case roomRules:
				if !sr.rulesNotMonotone {
					continue // supersets only take more from the same queues
				}
			}
		} else {
			sr.budget-- // count skipped sets too, so the search stays bounded
		}
		for pos := e.pos + 1; pos < len(cand); pos++ {
			set := append(append([]int(nil), e.set...), cand[pos])
			h.push(candidate{pos: pos, set: set})
		}
	}
	return nil, true
}

// greedy evicts every candidate, sees where j lands, keeps the units on those
// nodes (giving up when they alone are not enough) and drops units, costliest
// first, while the rest still makes room for j; the rules are checked on
// what is left (fewer victims only make them easier). The result makes room
// and no unit can be dropped from it.
func (sr *search) greedy(cand []int) []int {
	rules := sr.rules
	if !sr.rulesGrow {
		sr.rules = nil
		defer func() { sr.rules = rules }()
	}
	set := sr.landing(cand)
	if len(set) == 0 || sr.try(set, false) != roomMade {
		if !sr.rulesGrow {
			return nil
		}
		// Victims on other nodes may be needed to satisfy the rules.
		if set = cand; sr.try(set, false) != roomMade {
			return nil
		}
	}
	order := append([]int(nil), set...)
	sort.SliceStable(order, func(a, b int) bool { return sr.units[order[a]].held.GPU > sr.units[order[b]].held.GPU })
	for _, drop := range order {
		trial := without(set, drop)
		if len(trial) > 0 && sr.try(trial, false) == roomMade {
			set = trial
		}
	}
	if !sr.rulesGrow && rules != nil && !rules(set) {
		return nil
	}
	return set
}

// landing lists the candidates with a pod on a node j lands on once every
// candidate is evicted.
func (sr *search) landing(cand []int) []int {
	// Where each candidate runs, read before evicting clears it.
	on := make([][]*cluster.Node, len(cand))
	for k, i := range cand {
		for _, pod := range sr.units[i].pods {
			on[k] = append(on[k], sr.units[i].w.Placed[pod].Node)
		}
	}
	mark := sr.c.s.Mark()
	defer sr.c.s.Rollback(mark)
	for _, i := range cand {
		for _, pod := range sr.units[i].pods {
			sr.c.s.Unplace(sr.units[i].w, pod)
		}
	}
	pods, _ := placement.Place(sr.c.s, sr.pool, sr.j, sr.j.NextPods(), sr.c.cfg.Placement)
	hosts := map[*cluster.Node]bool{}
	for _, pod := range pods {
		hosts[sr.j.Placed[pod].Node] = true
	}
	var out []int
	for k, i := range cand {
		for _, n := range on[k] {
			if hosts[n] {
				out = append(out, i)
				break
			}
		}
	}
	return sr.close(out)
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func without(set []int, x int) []int {
	out := make([]int, 0, len(set))
	for _, i := range set {
		if i != x {
			out = append(out, i)
		}
	}
	return out
}

// candidate is a set in the best-first search, built by adding units at
// positions after pos.
type candidate struct {
	pos      int
	set      []int
	maxGroup int
	gpu      int64
	newest   []int // set sorted newest first, for the tie-break
	// node, when set, makes the entry a bound: it stands for the sets on
	// node, none of which comes before it. maxGroup and gpu are bounds, and
	// a set of one workload there comes no earlier than one of newestBound.
	node        *cluster.Node
	newestBound *cluster.Workload
}

// setHeap orders candidate sets: fewest GPUs, fewest workloads sent back to
// Pending, fewest workloads touched, then newest (submission times compared
// newest first, then names).
type setHeap struct {
	units []unit
	items []candidate
}

func (h *setHeap) push(e candidate) {
	for _, i := range e.set {
		e.gpu += h.units[i].held.GPU
		e.maxGroup = max(e.maxGroup, h.units[i].group)
	}
	e.newest = append([]int(nil), e.set...)
	sort.Slice(e.newest, func(a, b int) bool { return newer(h.units[e.newest[a]], h.units[e.newest[b]]) })
	heap.Push(h, e)
}

// pushBound adds a node's bound, with maxGroup and gpu given.
func (h *setHeap) pushBound(e candidate) { heap.Push(h, e) }

func (h *setHeap) Len() int { return len(h.items) }
func (h *setHeap) Less(a, b int) bool {
	return lessSet(h.units, h.items[a], h.items[b])
}
func (h *setHeap) Swap(a, b int) { h.items[a], h.items[b] = h.items[b], h.items[a] }
func (h *setHeap) Push(x any)    { h.items = append(h.items, x.(candidate)) }
func (h *setHeap) Pop() any {
	e := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return e
}

func lessSet(units []unit, a, b candidate) bool {
	if a.maxGroup != b.maxGroup {
		return a.maxGroup < b.maxGroup
	}
	if a.gpu != b.gpu {
		return a.gpu < b.gpu
	}
	if a.node != nil || b.node != nil {
		return lessBound(units, a, b)
	}
	if na, nb := stoppedIn(units, a.set), stoppedIn(units, b.set); na != nb {
		return na < nb
	}
	if na, nb := workloadsIn(units, a.set), workloadsIn(units, b.set); na != nb {
		return na < nb
	}
	for i := 0; i < len(a.newest) && i < len(b.newest); i++ {
		ua, ub := units[a.newest[i]], units[b.newest[i]]
		if ua.w.Submitted != ub.w.Submitted {
			return ua.w.Submitted > ub.w.Submitted
		}
	}
	for i := 0; i < len(a.newest) && i < len(b.newest); i++ {
		ua, ub := units[a.newest[i]], units[b.newest[i]]
		if ua.w.ID != ub.w.ID {
			return ua.w.ID < ub.w.ID
		}
		if ua.pods[0] != ub.pods[0] {
			return ua.w.PlacedLater(ua.pods[0], ub.pods[0])
		}
	}
	return len(a.set) < len(b.set)
}

// lessBound is lessSet where a or b is a node's bound, which counts as a
// set of one workload, newestBound, that sends none back to Pending, and
// comes before the sets it ties with; bounds that tie go in node order. (A
// set of one workload, its units all of the same age and name, compares by
// its newest unit first.)
func lessBound(units []unit, a, b candidate) bool {
	key := func(e candidate) (int, int, *cluster.Workload) {
		if e.node != nil {
			return 0, 1, e.newestBound
		}
		return stoppedIn(units, e.set), workloadsIn(units, e.set), units[e.newest[0]].w
	}
	sa, na, wa := key(a)
	sb, nb, wb := key(b)
	if sa != sb {
		return sa < sb
	}
	if na != nb {
		return na < nb
	}
	if na == 1 && wa != wb {
		return newerWorkload(wa, wb)
	}
	if a.node == nil || b.node == nil {
		return b.node == nil
	}
	return a.node.Name < b.node.Name
}

// newerWorkload orders workloads as "newest" does: later submission first,
// then by name.
func newerWorkload(a, b *cluster.Workload) bool {
	if a.Submitted != b.Submitted {
		return a.Submitted > b.Submitted
	}
	return a.ID < b.ID
}

// workloadsIn counts distinct workloads in a set (pod units of one elastic
// workload count once).
func workloadsIn(units []unit, set []int) int {
	n := 0
	for i, x := range set {
		dup := false
		for _, y := range set[:i] {
			if units[y].w == units[x].w {
				dup = true
				break
			}
		}
		if !dup {
			n++
		}
	}
	return n
}

// stoppedIn counts the workloads a set sends back to Pending: those of its
// whole and rest units (an elastic workload that only loses pods above its
// minimum keeps running). A workload has at most one such unit.
func stoppedIn(units []unit, set []int) int {
	n := 0
	for _, x := range set {
		if units[x].stops {
			n++
		}
	}
	return n
}

// newer orders units newest submission first, then by name, then the pod
// placed last first (SCHEDULING.md §4).
func newer(a, b unit) bool {
	if a.w.Submitted != b.w.Submitted {
		return a.w.Submitted > b.w.Submitted
	}
	if a.w.ID != b.w.ID {
		return a.w.ID < b.w.ID
	}
	return a.pods[0] != b.pods[0] && a.w.PlacedLater(a.pods[0], b.pods[0])
}

func sortBySeq(ws []*cluster.Workload) {
	sort.Slice(ws, func(i, j int) bool { return ws[i].Seq < ws[j].Seq })
}
