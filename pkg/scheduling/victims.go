package scheduling

import (
	"container/heap"
	"sort"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
)

// unit is what an eviction takes (SCHEDULING.md §3 "Which victims"): a whole
// workload holding no more than its gang minimum, or one pod above an elastic
// workload's minimum.
type unit struct {
	w    *cluster.Workload
	pods []int
	held cluster.Resources
}

// unitsOf splits a running workload into units. Pods above the minimum go one
// at a time, the last placed first; a workload at or below its minimum is one
// unit. (While it holds pods above its minimum, it is not offered whole: its
// extra pods go first.)
func unitsOf(w *cluster.Workload) []unit {
	pods := placedPods(w)
	if len(pods) <= w.MinPods {
		return []unit{{w: w, pods: pods, held: w.Held()}}
	}
	var out []unit
	for i := len(pods) - 1; i >= w.MinPods; i-- {
		out = append(out, unit{w: w, pods: []int{pods[i]}, held: w.Placed[pods[i]].Held})
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
	c      *cycle
	j      *cluster.Workload
	pool   *cluster.Pool
	units  []unit
	rules  func(set []int) bool // reclaim's per-victim and after rules; nil for preempt
	budget int
}

// try evicts set, checks the rules and places j; keep leaves it all in place
// when room is made, otherwise the state is rolled back.
func (sr *search) try(set []int, keep bool) room {
	sr.budget--
	if sr.rules != nil && !sr.rules(set) {
		return roomRules
	}
	mark := sr.c.s.Mark()
	for _, i := range set {
		for _, pod := range sr.units[i].pods {
			sr.c.s.Unplace(sr.units[i].w, pod)
		}
	}
	ok := checkQuota(sr.j, sr.pool, request(sr.j, sr.pool)) == ""
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

// find returns the chosen set (indexes into units), or nil. groups gives the
// end index of each group G1, G2, ... in units.
func (sr *search) find(groups []int) []int {
	m := len(groups)
	all := func(k int) []int { return seq(groups[k-1]) }
	// The smallest k whose groups together could make room, ignoring rules
	// (placement only grows with more victims, so bisect).
	lo, hi := 1, m
	if sr.placeable(all(m)) == false {
		return nil
	}
	for lo < hi {
		mid := (lo + hi) / 2
		if sr.placeable(all(mid)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	for k := lo; k <= m && sr.budget > 0; k++ {
		if set := sr.best(all(k)); set != nil {
			return set
		}
	}
	return nil
}

func (sr *search) placeable(set []int) bool {
	rules := sr.rules
	sr.rules = nil
	defer func() { sr.rules = rules }()
	return sr.try(set, false) == roomMade
}

// best searches candidate units cand for the set with the fewest GPUs, then
// the fewest workloads, then the newest, that makes room. A single pod needs
// room on one node, so its sets are built node by node; a gang searches all
// sets. Past the budget it falls back to a greedy set pruned to a minimal one.
func (sr *search) best(cand []int) []int {
	if sr.j.NextPods() == 1 {
		if set, done := sr.nodeLocal(cand); done {
			return set
		}
	} else if set, done := sr.bestFirst([][]int{cand}); done {
		return set
	}
	return sr.greedy(cand)
}

// nodeLocal runs the best-first search over sets of units that share one node.
func (sr *search) nodeLocal(cand []int) ([]int, bool) {
	byNode := map[*cluster.Node][]int{}
	var nodes []*cluster.Node
	for _, i := range cand {
		for _, n := range sr.units[i].w.Nodes() {
			node := sr.c.s.Node(n)
			if byNode[node] == nil {
				nodes = append(nodes, node)
			}
			byNode[node] = append(byNode[node], i)
		}
	}
	sort.Slice(nodes, func(a, b int) bool { return nodes[a].Name < nodes[b].Name })
	var spaces [][]int
	for _, n := range nodes {
		if n.Ready && (sr.j.NodeType == "" || n.Type() == sr.j.NodeType) {
			spaces = append(spaces, byNode[n])
		}
	}
	return sr.bestFirst(spaces)
}

// bestFirst enumerates, cheapest first, the non-empty subsets of each space
// and returns the first that makes room. done is false when the budget ran
// out before the answer was known.
func (sr *search) bestFirst(spaces [][]int) ([]int, bool) {
	h := &setHeap{units: sr.units}
	for s, space := range spaces {
		for pos := range space {
			h.push(candidate{space: s, pos: pos, set: []int{space[pos]}})
		}
	}
	for h.Len() > 0 {
		if sr.budget <= 0 {
			return nil, false
		}
		e := heap.Pop(h).(candidate)
		switch sr.try(e.set, false) {
		case roomMade:
			return e.set, true
		case roomRules:
			continue // supersets only take more from the same queues
		}
		space := spaces[e.space]
		for pos := e.pos + 1; pos < len(space); pos++ {
			set := append(append([]int(nil), e.set...), space[pos])
			h.push(candidate{space: e.space, pos: pos, set: set})
		}
	}
	return nil, true
}

// greedy evicts every candidate, sees where j lands, keeps the units on those
// nodes (or all of them when that is not enough) and drops units, costliest
// first, while the rest still makes room: a set that makes room and from
// which no unit can be removed.
func (sr *search) greedy(cand []int) []int {
	set := sr.landing(cand)
	if sr.try(set, false) != roomMade {
		set = cand
		if sr.try(set, false) != roomMade {
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
	return set
}

// landing lists the candidates with a pod on a node j lands on once every
// candidate is evicted.
func (sr *search) landing(cand []int) []int {
	mark := sr.c.s.Mark()
	defer sr.c.s.Rollback(mark)
	hosts := map[*cluster.Node]bool{}
	for _, i := range cand {
		for _, pod := range sr.units[i].pods {
			sr.c.s.Unplace(sr.units[i].w, pod)
		}
	}
	pods, _ := placement.Place(sr.c.s, sr.pool, sr.j, sr.j.NextPods(), sr.c.cfg.Placement)
	for _, pod := range pods {
		hosts[sr.j.Placed[pod].Node] = true
	}
	var out []int
	for _, i := range cand {
		for _, pod := range sr.units[i].pods {
			if hosts[sr.units[i].w.Placed[pod].Node] {
				out = append(out, i)
				break
			}
		}
	}
	return out
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

// candidate is a set in the best-first search: units of one space, built by
// adding units at positions after pos.
type candidate struct {
	space, pos int
	set        []int
	gpu        int64
	newest     []int // set sorted newest first, for the tie-break
}

// setHeap orders candidate sets: fewest GPUs, fewest workloads, then newest
// (submission times compared newest first, then names).
type setHeap struct {
	units []unit
	items []candidate
}

func (h *setHeap) push(e candidate) {
	for _, i := range e.set {
		e.gpu += h.units[i].held.GPU
	}
	e.newest = append([]int(nil), e.set...)
	sort.Slice(e.newest, func(a, b int) bool { return newer(h.units[e.newest[a]], h.units[e.newest[b]]) })
	heap.Push(h, e)
}

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
	if a.gpu != b.gpu {
		return a.gpu < b.gpu
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
			return ua.pods[0] > ub.pods[0]
		}
	}
	return len(a.set) < len(b.set)
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

// newer orders units newest submission first, then by name, then pod.
func newer(a, b unit) bool {
	if a.w.Submitted != b.w.Submitted {
		return a.w.Submitted > b.w.Submitted
	}
	if a.w.ID != b.w.ID {
		return a.w.ID < b.w.ID
	}
	return a.pods[0] > b.pods[0]
}

func sortBySeq(ws []*cluster.Workload) {
	sort.Slice(ws, func(i, j int) bool { return ws[i].Seq < ws[j].Seq })
}
