package scheduling

import (
	"slices"
	"sort"

	"github.com/runwayhq/runway/pkg/cluster"
)

// The victim search pulls candidates queue by queue, group by group, in the
// order of SCHEDULING.md §3 "Which victims". In a reclaim storm most groups
// pulled for a pod are vain (every set of their units fails the after rule
// unless a unit of the reclaimer's own department joins it), and a
// reclaimer whose department is over its fair share pulls the groups of
// hundreds of queues before reaching one it can take from. Such a group is
// deferred: it keeps its place in the group order but its units are not
// copied; they join the search node by node (resolve), only on the nodes
// that a group pulled later offers room on. Each queue's candidate list is
// kept for the cycle and built again only after a binding or an eviction in
// that queue, so a deferred group costs a few comparisons.

// feed is where a search pulls its candidates from: queues in victim order.
type feed struct {
	queues []*cluster.Queue
	next   int
	// keep filters a queue's candidates (preempt: lower priorities only);
	// nil keeps them all.
	keep func(*cluster.Workload) bool
}

// candidateList is a queue's candidates in one pool, lowest priority first,
// then in submission order, with their units, and the queue's change count
// when it was built.
type candidateList struct {
	ws    []*cluster.Workload
	units [][]unit // per workload; each unit's rank is its place in the list
	// groups are the runs of one priority, the queue's victim groups when
	// every candidate is kept.
	groups  []listGroup
	version int
	seen    int // how many of cycle.touchedIn[q] it includes
}

// listGroup is one priority's run of a candidate list.
type listGroup struct {
	from, to int // ws[from:to]
	// distinct holds one unit per amount held: whether a unit fails the
	// after rule alone depends only on its queue and what it holds.
	distinct []unit
}

// deferredGroup is a group left out of units while it is vain.
type deferredGroup struct {
	list  *candidateList
	lg    listGroup
	group int
}

// deferMark finds a queue's deferred groups of one search: sr.deferred[first:first+n].
type deferMark struct {
	search   int
	first, n int
}

// deadMemo is one queue's entry in cycle.dead: for search, whether a unit
// holding held[i] fails the after rule alone.
type deadMemo struct {
	search int
	held   []cluster.Resources
	dead   []bool
}

// poolQueue keys per-queue caches of one pool.
type poolQueue struct {
	q *cluster.Queue
	p *cluster.Pool
}

// candidates lists v's running preemptible workloads in pool p that may be
// victims, lowest priority first, then in submission order. The list is
// kept for the cycle; after a binding or an eviction in v, only the
// workloads they touched are taken out and put back in their place: a
// reclaim storm reads hundreds of queues for every workload.
func (c *cycle) candidates(v *cluster.Queue, p *cluster.Pool) *candidateList {
	slot := c.lists[p.Index].at(v)
	old, version := *slot, *c.queueChanges.at(v)
	ok := old != nil
	if ok && old.version == version {
		return old
	}
	list := &candidateList{version: version, seen: len(c.touchedIn[v])}
	if !ok {
		for w := range v.Running() {
			if c.candidate(w, p) {
				list.ws = append(list.ws, w)
			}
		}
		sort.Slice(list.ws, func(a, b int) bool { return victimLess(list.ws[a], list.ws[b]) })
		list.units = make([][]unit, len(list.ws))
		for i, w := range list.ws {
			list.units[i] = victimUnitsOf(w)
		}
	} else {
		changed := c.touchedIn[v][old.seen:]
		list.ws = make([]*cluster.Workload, 0, len(old.ws)+len(changed))
		list.units = make([][]unit, 0, len(old.ws)+len(changed))
		for i, w := range old.ws {
			if !slices.Contains(changed, w) {
				list.ws, list.units = append(list.ws, w), append(list.units, old.units[i])
			}
		}
		for k, w := range changed {
			if slices.Contains(changed[:k], w) || !c.candidate(w, p) {
				continue
			}
			i := sort.Search(len(list.ws), func(i int) bool { return victimLess(w, list.ws[i]) })
			list.ws, list.units = slices.Insert(list.ws, i, w), slices.Insert(list.units, i, victimUnitsOf(w))
		}
	}
	rank := 0
	for i, w := range list.ws {
		us := list.units[i]
		for k := range us {
			us[k].rank = rank
			rank++
		}
		if i == 0 || w.Priority.Value != list.ws[i-1].Priority.Value {
			list.groups = append(list.groups, listGroup{from: i})
		}
		lg := &list.groups[len(list.groups)-1]
		lg.to = i + 1
		for _, u := range us {
			if !heldIn(lg.distinct, u.held) {
				lg.distinct = append(lg.distinct, u)
			}
		}
	}
	*slot = list
	return list
}

// candidate reports whether w (running) may be a victim in pool p. Work
// that evictions made room for in this cycle is one (a search that takes it
// starts the try over, settle.go), except in the last try.
func (c *cycle) candidate(w *cluster.Workload, p *cluster.Pool) bool {
	return w.PlacedPods() > 0 && w.Priority.Preemptible && w.Pool() == p && !(c.guard && c.placedFor[w] > 0) && !w.Aside
}

// victimLess is the order of a candidate list: lowest priority first, then
// in submission order.
func victimLess(a, b *cluster.Workload) bool {
	if a.Priority.Value != b.Priority.Value {
		return a.Priority.Value < b.Priority.Value
	}
	return a.Seq < b.Seq
}

// index finds w in the list, -1 when it is not there.
func (l *candidateList) index(w *cluster.Workload) int {
	i := sort.Search(len(l.ws), func(i int) bool { return !victimLess(l.ws[i], w) })
	if i < len(l.ws) && l.ws[i] == w {
		return i
	}
	return -1
}

func heldIn(us []unit, held cluster.Resources) bool {
	for _, u := range us {
		if u.held == held {
			return true
		}
	}
	return false
}

// pull appends the next queue's groups; false when none is left.
func (sr *search) pull() bool {
	for sr.feed.next < len(sr.feed.queues) {
		v := sr.feed.queues[sr.feed.next]
		sr.feed.next++
		before := len(sr.groups)
		sr.appendGroups(v)
		if len(sr.groups) > before {
			return true
		}
	}
	return false
}

// appendGroups adds v's candidate units, one group per priority, lowest
// first. While the search is lazy and nothing pulled helps, a vain group is
// deferred instead.
func (sr *search) appendGroups(v *cluster.Queue) {
	list := sr.c.candidates(v, sr.pool)
	if sr.feed.keep != nil {
		sr.appendKept(list)
		return
	}
	for _, lg := range list.groups {
		if sr.lazy && sr.helping == 0 && sr.vainListGroup(lg) {
			sr.deferGroup(v, list, lg)
			continue
		}
		sr.starts = append(sr.starts, len(sr.units))
		sr.units = appendUnits(sr.units, list, lg, len(sr.groups))
		sr.groups = append(sr.groups, len(sr.units))
	}
}

// appendKept adds the kept candidates of list, one group per priority.
func (sr *search) appendKept(list *candidateList) {
	start, prio := len(sr.units), 0
	for i, w := range list.ws {
		if !sr.feed.keep(w) {
			continue
		}
		if len(sr.units) > start && w.Priority.Value != prio {
			sr.starts = append(sr.starts, start)
			sr.groups = append(sr.groups, len(sr.units))
			start = len(sr.units)
		}
		prio = w.Priority.Value
		for _, u := range list.units[i] {
			u.group = len(sr.groups)
			sr.units = append(sr.units, u)
		}
	}
	if len(sr.units) > start {
		sr.starts = append(sr.starts, start)
		sr.groups = append(sr.groups, len(sr.units))
	}
}

func appendUnits(units []unit, list *candidateList, lg listGroup, group int) []unit {
	for _, us := range list.units[lg.from:lg.to] {
		for _, u := range us {
			u.group = group
			units = append(units, u)
		}
	}
	return units
}

// vainListGroup is vainGroup for a group not pulled yet: its queue does not
// help, and each amount its units hold fails alone.
func (sr *search) vainListGroup(lg listGroup) bool {
	if sr.deadAlone == nil || sr.helps(&lg.distinct[0]) {
		return false
	}
	for i := range lg.distinct {
		if !sr.deadAlone(&lg.distinct[i]) {
			return false
		}
	}
	return true
}

// deferGroup gives lg its group number with no units in units (an empty
// range marks it).
func (sr *search) deferGroup(v *cluster.Queue, list *candidateList, lg listGroup) {
	m := sr.c.deferred.at(v)
	if m.search != sr.id {
		*m = deferMark{search: sr.id, first: len(sr.deferred)}
	}
	m.n++
	sr.deferred = append(sr.deferred, deferredGroup{list: list, lg: lg, group: len(sr.groups)})
	sr.starts = append(sr.starts, len(sr.units))
	sr.groups = append(sr.groups, len(sr.units))
}

// resolve adds to byNode[n] the units on n of the groups deferred so far,
// keeping the list in group order, then list order (the order the units
// would have in units had they been pulled): the sets built from it, and
// so the plan, are the same.
func (sr *search) resolve(byNode map[*cluster.Node][]int, n *cluster.Node) {
	done := sr.resolved[n]
	if done == len(sr.deferred) {
		return
	}
	if sr.resolved == nil {
		sr.resolved = map[*cluster.Node]int{}
	}
	sr.resolved[n] = len(sr.deferred)
	l := byNode[n]
	before := len(l)
	for _, ref := range n.Pods {
		w := ref.Workload
		m := sr.c.deferred.at(w.Project)
		if m.search != sr.id || m.first+m.n <= done {
			continue
		}
		i := sr.deferred[m.first].list.index(w)
		if i < 0 {
			continue // not a candidate
		}
		for d := max(m.first, done); d < m.first+m.n; d++ {
			dg := &sr.deferred[d]
			if i < dg.lg.from || i >= dg.lg.to {
				continue
			}
			if x := sr.deferredUnit(dg, i, ref.Pod); x >= 0 && !containsIndex(l[before:], x) {
				l = append(l, x)
			}
		}
	}
	if len(l) > before {
		sort.Slice(l, func(a, b int) bool {
			ua, ub := &sr.units[l[a]], &sr.units[l[b]]
			if ua.group != ub.group {
				return ua.group < ub.group
			}
			return ua.rank < ub.rank
		})
		byNode[n] = l
	}
}

// deferredUnit returns the index in units of the unit of dg's i-th
// workload that holds pod, appending it on first use. A rest unit brings its
// workload's extra pods along, wherever they run: a set holds them together
// (search.close).
func (sr *search) deferredUnit(dg *deferredGroup, i, pod int) int {
	for _, u := range dg.list.units[i] {
		if !containsIndex(u.pods, pod) {
			continue
		}
		if u.rest {
			for _, e := range dg.list.units[i] {
				if !e.rest {
					sr.lazyUnit(dg, e)
				}
			}
		}
		return sr.lazyUnit(dg, u)
	}
	return -1
}

// lazyUnit is u's index in units, appending it on first use.
func (sr *search) lazyUnit(dg *deferredGroup, u unit) int {
	ref := cluster.PodRef{Workload: u.w, Pod: u.pods[0]}
	if x, ok := sr.lazyAt[ref]; ok {
		return x
	}
	if sr.lazyAt == nil {
		sr.lazyAt = map[cluster.PodRef]int{}
	}
	u.group = dg.group
	sr.lazyAt[ref] = len(sr.units)
	sr.units = append(sr.units, u)
	return len(sr.units) - 1
}

func containsIndex(l []int, x int) bool {
	for _, y := range l {
		if y == x {
			return true
		}
	}
	return false
}

// materialize copies the deferred groups into units, in group order, and
// ends the laziness: the greedy fallback reads units by group ranges.
func (sr *search) materialize() {
	sr.lazy = false
	if len(sr.deferred) == 0 {
		return
	}
	units := make([]unit, 0, len(sr.units))
	d := 0
	for g := range sr.groups {
		start := len(units)
		if d < len(sr.deferred) && sr.deferred[d].group == g {
			dg := sr.deferred[d]
			units = appendUnits(units, dg.list, dg.lg, g)
			d++
		} else {
			units = append(units, sr.units[sr.starts[g]:sr.groups[g]]...)
		}
		sr.starts[g], sr.groups[g] = start, len(units)
	}
	sr.units, sr.deferred, sr.lazyAt, sr.resolved = units, nil, nil, nil
}

// pulledNone reports whether the search has had no candidate at all.
func (sr *search) pulledNone() bool { return len(sr.units) == 0 && len(sr.deferred) == 0 }

// scratch is the victim search's working memory, lent to one reclaim
// search after another: a storm runs thousands of them per cycle.
type scratch struct {
	units          []unit
	starts, groups []int
	deferred       []deferredGroup
	byNode         map[*cluster.Node][]int
	items          []candidate
}

func (sc *scratch) lend(sr *search) {
	sr.units, sr.starts, sr.groups, sr.deferred = sc.units[:0], sc.starts[:0], sc.groups[:0], sc.deferred[:0]
}

// keep takes the search's memory back once its units are no longer read.
func (sc *scratch) keep(sr *search) {
	clear(sr.deferred)
	sc.units, sc.starts, sc.groups, sc.deferred = sr.units[:0], sr.starts[:0], sr.groups[:0], sr.deferred[:0]
}

// nodes returns the empty per-node index.
func (sc *scratch) nodes() map[*cluster.Node][]int {
	if sc.byNode == nil {
		sc.byNode = map[*cluster.Node][]int{}
	}
	clear(sc.byNode)
	return sc.byNode
}
