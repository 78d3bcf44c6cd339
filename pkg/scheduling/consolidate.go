package scheduling

import (
	"container/heap"
	"fmt"
	"slices"
	"sort"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
)

// consolidate places j, still pending after preempt, by moving running
// preemptible units inside its pool when the pool's free resources hold its
// request in total but no node does (SCHEDULING.md §3 "Consolidate"). A move
// set works when, its units taken off, j is placed and every unit is placed
// again in the pool; the set moving the fewest GPUs, then the fewest
// workloads, then the newest is taken. Queue allocations do not change, so
// no quota, fair-share or after-rule check is involved. It reports whether
// j was placed.
//
// One pod uses room on one node, so the sets worth trying for it are, node
// by node, the minimal subsets of that node's units after which it fits (as
// in the victim search); a gang's are searched by findGangMove.
func (c *cycle) consolidate(j *cluster.Workload) bool {
	c.on(StepConsolidate, j)
	p := c.homePool(j)
	req := request(j, p)
	if j.NextPods() == 0 || checkQuota(j, p, req).Check != 0 {
		return false
	}
	free := p.Free()
	if free.GPU < req.GPU || free.CPU < req.CPU || free.Memory < req.Memory {
		return false // not fragmentation: the pool is full
	}
	key := searchKey{rule: RuleConsolidation, shape: shapeOf(j, p)}
	if miss, ok := c.noRoom[key]; ok && miss.version == c.version() {
		return false
	}
	sr := &search{c: c, j: j, pool: p, budget: c.cfg.SearchBound, units: c.movable(p, j)}
	find := sr.findMove
	if j.NextPods() > 1 {
		find = sr.findGangMove
	}
	if set := find(); set != nil {
		if c.vetoed(j, p, 0) {
			return false
		}
		c.move(j, p, sr.units, set)
		return true
	}
	c.noRoom[key] = noRoom{version: c.version()}
	return false
}

// movable lists the units that may move in pool p for j: running
// preemptible workloads other than j, whole or one pod above an elastic
// workload's minimum, not placed or evicted in this cycle; in project, then
// submission order.
func (c *cycle) movable(p *cluster.Pool, j *cluster.Workload) []unit {
	var units []unit
	for _, q := range c.s.Projects() {
		var ws []*cluster.Workload
		for w := range q.Running() {
			if w != j && w.Priority.Preemptible && w.Pool() == p && !c.touched[w] && len(c.evicted[w]) == 0 && !w.Aside {
				ws = append(ws, w)
			}
		}
		sortBySeq(ws)
		for _, w := range ws {
			units = append(units, unitsOf(w)...)
		}
	}
	return units
}

// findMove returns the cheapest working move set (indexes into units), or
// nil. Candidate sets are, node by node, the minimal subsets after which j's
// pod fits there; they are tried cheapest first.
func (sr *search) findMove() []int {
	byNode, nodes := sr.unitsByNode()
	h := &setHeap{units: sr.units}
	for _, n := range nodes {
		if !n.Ready || !placement.Eligible(sr.c.s, n, sr.j) || !sr.fitsAfter(n, byNode[n]) {
			continue
		}
		for _, space := range sr.spaces(n, byNode[n]) {
			if len(space) > maxUnitsPerNode {
				continue
			}
			for _, set := range sr.minimalSets(n, space) {
				h.push(candidate{set: set})
			}
		}
	}
	for h.Len() > 0 && sr.budget > 0 {
		sr.budget--
		if e := heap.Pop(h).(candidate); sr.moves(e.set, false) {
			return e.set
		}
	}
	return nil
}

// moves takes the set's units off their nodes, places j, then places every
// unit again (the most GPUs first), and reports whether all of it fit. keep
// leaves a working move in place; otherwise the state is rolled back.
func (sr *search) moves(set []int, keep bool) bool {
	s := sr.c.s
	mark := s.Mark()
	for _, i := range set {
		for _, pod := range sr.units[i].pods {
			s.Unplace(sr.units[i].w, pod)
		}
	}
	ok := true
	if pods, _ := placement.Place(s, sr.pool, sr.j, sr.j.NextPods(), sr.c.cfg.Placement); pods == nil {
		ok = false
	}
	for _, i := range moveOrder(sr.units, set) {
		if !ok {
			break
		}
		u := sr.units[i]
		pods, _ := placement.Place(s, sr.pool, u.w, len(u.pods), sr.c.cfg.Placement)
		// Allocations must not change: a GPU-memory pod holds more of a
		// device with less memory.
		ok = pods != nil && heldBy(u.w, pods) == u.held
	}
	if !ok || !keep {
		s.Rollback(mark)
	}
	return ok
}

// moveOrder is the order moved units are placed again: the most GPUs first
// (they are the hardest to fit), then the set's order.
func moveOrder(units []unit, set []int) []int {
	order := append([]int(nil), set...)
	sort.SliceStable(order, func(a, b int) bool { return units[order[a]].held.GPU > units[order[b]].held.GPU })
	return order
}

// move makes a working move set part of the plan: each unit's eviction (rule
// consolidation, for j), j's binding, and each unit's new binding, placed in
// the order moves tried them.
func (c *cycle) move(j *cluster.Workload, p *cluster.Pool, units []unit, set []int) {
	req := request(j, p)
	r := cluster.GPU
	if req.GPU == 0 {
		r = cluster.CPU
	}
	need := cluster.Quantity(r, req.Get(r)) + " on one node"
	if k := j.NextPods(); k > 1 {
		need = fmt.Sprintf("%d pods of %s on nodes with room", k, cluster.Quantity(r, j.Widest().Counted(p.MinDeviceMemory).Get(r)))
	}
	// The moved workloads may be other tenants': j's project is named, j
	// is not.
	why := fmt.Sprintf("moved in node pool %s to make room for a workload of project %s, which needed %s while the pool had %s free in total",
		p.Name, j.Project.Name, need, cluster.Quantity(r, p.Free().Get(r)))
	c.made(j)
	for _, i := range set {
		c.movedBy[units[i].w] = len(c.plan.Evictions)
		c.evict(units[i], RuleConsolidation, j, why)
	}
	if !c.tryAllocate(j, p) {
		panic(fmt.Sprintf("scheduling: the move chosen for %s did not make room", j.ID))
	}
	for _, i := range moveOrder(units, set) {
		u := units[i]
		pods, _ := placement.Place(c.s, p, u.w, len(u.pods), c.cfg.Placement)
		if pods == nil {
			panic(fmt.Sprintf("scheduling: %s, moved for %s, did not fit again", u.w.ID, j.ID))
		}
		c.bind(u.w, pods)
	}
}

// heldBy is what the given pods of w hold.
func heldBy(w *cluster.Workload, pods []int) cluster.Resources {
	var r cluster.Resources
	for _, pod := range pods {
		r = r.Add(w.Placed[pod].Held)
	}
	return r
}

// unitsByNode lists, for each node running one of the units, the units with
// a pod there (each once), and those nodes in name order.
func (sr *search) unitsByNode() (map[*cluster.Node][]int, []*cluster.Node) {
	byNode := map[*cluster.Node][]int{}
	var nodes []*cluster.Node
	for i, u := range sr.units {
		for _, pod := range u.pods {
			n := u.w.Placed[pod].Node
			if l := byNode[n]; len(l) > 0 && l[len(l)-1] == i {
				continue // another pod of the same unit
			}
			if byNode[n] == nil {
				nodes = append(nodes, n)
			}
			byNode[n] = append(byNode[n], i)
		}
	}
	sort.Slice(nodes, func(a, b int) bool { return nodes[a].Name < nodes[b].Name })
	return byNode, nodes
}

// exactMoveUnits bounds a gang's exact move search: its sets are drawn from
// at most this many units (2^12 sets). maxMoveUnits bounds the greedy one
// past it: a gang that needs more units moved waits. Either way at most
// Config.SearchBound sets are tried with real placements.
const (
	exactMoveUnits = 12
	maxMoveUnits   = 128
)

// findGangMove returns a working move set for a gang of k pods (indexes
// into units), or nil.
//
// The pods may land on several nodes, so no node-by-node enumeration is
// exact. The search is bounded instead. It ranks the nodes by how cheap
// they are to open for the gang (fewest GPUs of movable work per pod of j
// the node would gain with all of it gone; ties: fewer units, then name).
// First it takes their units, node by node, as long as they add up to at
// most exactMoveUnits, and tries every subset of those cheapest first
// (fewest GPUs, fewest workloads, newest): within those units the set
// chosen is the cheapest that works. When none works, greedyMove.
func (sr *search) findGangMove() []int {
	byNode, nodes := sr.unitsByNode()
	fitsNow := 0
	for _, n := range sr.pool.Nodes {
		if sr.opens(n) {
			fitsNow += sr.podsAfter(n, nil)
		}
	}
	short := sr.j.NextPods() - fitsNow
	if short <= 0 {
		return nil // the pods fit by arithmetic, yet placement failed: nothing to move for
	}
	var opts []opening
	for _, n := range nodes {
		if !sr.opens(n) {
			continue
		}
		o := opening{n: n, size: len(byNode[n]), gain: sr.podsAfter(n, byNode[n]) - sr.podsAfter(n, nil)}
		if o.gain <= 0 {
			continue
		}
		for _, i := range byNode[n] {
			o.gpu += sr.units[i].held.GPU
		}
		opts = append(opts, o)
	}
	sort.SliceStable(opts, func(a, b int) bool {
		if x, y := opts[a].gpu*int64(opts[b].gain), opts[b].gpu*int64(opts[a].gain); x != y {
			return x < y
		}
		return opts[a].size < opts[b].size // then name: nodes are in name order
	})
	var cand []int
	in := map[int]bool{}
	gain := 0
	for _, o := range opts {
		var add []int
		for _, i := range byNode[o.n] {
			if !in[i] {
				add = append(add, i)
			}
		}
		if len(cand)+len(add) > exactMoveUnits {
			continue
		}
		for _, i := range add {
			in[i] = true
		}
		cand = append(cand, add...)
		gain += o.gain
	}
	if gain >= short {
		if set := sr.cheapestMove(cand, short); set != nil {
			return set
		}
	}
	return sr.greedyMove(opts, byNode, short)
}

// opening is what moving all the movable work off a node gives a gang.
type opening struct {
	n          *cluster.Node
	gpu        int64 // GPUs of the movable units there
	gain, size int   // pods of j the node would hold more; units there
}

// greedyMove is the search past the exact one: all units of the nodes
// cheapest to open, node by node, until those nodes would hold the pods
// that do not fit now (at most maxMoveUnits units). When moving them all
// works, one pass drops each unit, the most GPUs first, whose set without
// it still works: the set returned works.
func (sr *search) greedyMove(opts []opening, byNode map[*cluster.Node][]int, short int) []int {
	var set []int
	in := map[int]bool{}
	gain := 0
	for _, o := range opts {
		if gain >= short {
			break
		}
		for _, i := range byNode[o.n] {
			if !in[i] {
				in[i] = true
				set = append(set, i)
			}
		}
		gain += o.gain
	}
	if gain < short || len(set) > maxMoveUnits || sr.budget <= 0 {
		return nil
	}
	sr.budget--
	if !sr.moves(set, false) {
		return nil
	}
	for _, drop := range moveOrder(sr.units, set) {
		if sr.budget <= 0 {
			break
		}
		if trial := without(set, drop); len(trial) > 0 && sr.gains(trial) >= short {
			sr.budget--
			if sr.moves(trial, false) {
				set = trial
			}
		}
	}
	return set
}

// cheapestMove tries the non-empty subsets of cand cheapest first and
// returns the first that works, or nil.
func (sr *search) cheapestMove(cand []int, short int) []int {
	h := &setHeap{units: sr.units}
	for pos := range cand {
		h.push(candidate{pos: pos, set: []int{cand[pos]}})
	}
	for h.Len() > 0 && sr.budget > 0 {
		e := heap.Pop(h).(candidate)
		if sr.gains(e.set) >= short {
			sr.budget--
			if sr.moves(e.set, false) {
				return e.set
			}
		}
		// A superset costs more (more GPUs or workloads), so the heap still
		// yields sets cheapest first.
		for pos := e.pos + 1; pos < len(cand); pos++ {
			h.push(candidate{pos: pos, set: append(append([]int(nil), e.set...), cand[pos])})
		}
	}
	return nil
}

// gains is how many more of j's pods the nodes could hold, by device
// arithmetic, with the set's units gone.
func (sr *search) gains(set []int) int {
	var seen []*cluster.Node
	total := 0
	for _, i := range set {
		for _, pod := range sr.units[i].pods {
			n := sr.units[i].w.Placed[pod].Node
			if slices.Contains(seen, n) {
				continue
			}
			seen = append(seen, n)
			if sr.opens(n) {
				total += sr.podsAfter(n, set) - sr.podsAfter(n, nil)
			}
		}
	}
	return total
}

// opens reports whether j's pods may go to n: Ready, not cordoned,
// placement.Eligible (node type, role).
func (sr *search) opens(n *cluster.Node) bool {
	return n.Ready && !n.Cordoned && placement.Eligible(sr.c.s, n, sr.j)
}

// podsAfter is how many of j's pods would fit on n once the set's pods there
// are gone (at most the pods j asks for): device arithmetic only, the state
// is not touched.
func (sr *search) podsAfter(n *cluster.Node, set []int) int {
	used, whole := make([]int64, len(n.Devices)), make([]bool, len(n.Devices))
	free := sr.freeAfter(n, set, used, whole)
	req := sr.j.Widest()
	fit := sr.j.NextPods()
	if req.CPU > 0 {
		fit = min(fit, int(free.CPU/req.CPU))
	}
	if req.Memory > 0 {
		fit = min(fit, int(free.Memory/req.Memory))
	}
	slots := 0
	for d := range n.Devices {
		if n.Devices[d].Unhealthy != "" {
			continue
		}
		switch {
		case req.Shares():
			if share := req.ShareOn(n.Devices[d].Memory); !whole[d] && share > 0 {
				slots += int((cluster.FullDevice - used[d]) / share)
			}
		case used[d] == 0:
			slots++ // an idle device
		}
	}
	switch {
	case req.Shares():
		fit = min(fit, slots)
	case req.Devices() > 0:
		fit = min(fit, slots/req.Devices())
	}
	return max(fit, 0)
}
