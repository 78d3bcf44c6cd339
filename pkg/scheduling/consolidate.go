package scheduling

import (
	"container/heap"
	"fmt"
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
// Only a workload asking for one pod now is served: a pod uses room on one
// node, so the sets worth trying are, node by node, the minimal subsets of
// that node's units after which it fits (as in the victim search).
func (c *cycle) consolidate(j *cluster.Workload) bool {
	p := c.homePool(j)
	req := request(j, p)
	if j.NextPods() != 1 || checkQuota(j, p, req).Check != 0 {
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
	if set := sr.findMove(); set != nil {
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
			if w != j && w.Priority.Preemptible && w.Pool() == p && !c.touched[w] && len(c.evicted[w]) == 0 {
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
	h := &setHeap{units: sr.units}
	for _, n := range nodes {
		if !n.Ready || (sr.j.NodeType != "" && n.Type() != sr.j.NodeType) || !sr.fitsAfter(n, byNode[n]) {
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
	if pods, _ := placement.Place(s, sr.pool, sr.j, 1, sr.c.cfg.Placement); pods == nil {
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
	why := fmt.Sprintf("moved in node pool %s to make room for %s of project %s, which needed %s on one node while the pool had %s free in total",
		p.Name, j.Name, j.Project.Name, cluster.Quantity(r, req.Get(r)), cluster.Quantity(r, p.Free().Get(r)))
	c.placedFor[j] = true
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
