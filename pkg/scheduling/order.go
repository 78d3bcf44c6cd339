package scheduling

import (
	"slices"
	"sort"

	"github.com/runwayhq/runway/pkg/cluster"
)

// tolerance for comparing ratios computed in floating point.
const tolerance = 1e-9

// queueView is what the sort rules read of one queue in one pool.
type queueView struct {
	q     *cluster.Queue
	alloc cluster.Resources
	head  cluster.Resources // the head workload's request (zero when none)
	pool  *cluster.Pool
}

func view(q *cluster.Queue, p *cluster.Pool, head cluster.Resources) queueView {
	return queueView{q: q, alloc: q.Usage[p.Index].Allocated, head: head, pool: p}
}

// ceiling is max(deserved, fair share) capped by limit, for ratios and rule 5.
// An unlimited deserved means the limit if one is set, otherwise the pool
// total T (SCHEDULING.md §1 "Unlimited").
func ceiling(q *cluster.Queue, p *cluster.Pool, r cluster.Resource) int64 {
	quota := q.Quotas[p.Index]
	limit := quota.EffectiveLimit(r)
	d := quota.Deserved.Get(r)
	var c int64
	if d == cluster.Unlimited {
		if limit != cluster.Unlimited {
			return limit
		}
		return p.Total.Get(r)
	}
	c = max(d, q.FairShare[p.Index].Get(r))
	if limit != cluster.Unlimited && c > limit {
		c = limit
	}
	return c
}

// aboveFairShare: allocation above fair share in every one of gpu, cpu, memory.
func (v queueView) aboveFairShare() bool {
	fs := v.q.FairShare[v.pool.Index]
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		if v.alloc.Get(r) <= fs.Get(r) {
			return false
		}
	}
	return true
}

// withinDeserved: allocation plus the head request within deserved everywhere.
func (v queueView) withinDeserved() bool {
	d := v.q.Quotas[v.pool.Index].Deserved
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		if dr := d.Get(r); dr != cluster.Unlimited && v.alloc.Get(r)+v.head.Get(r) > dr {
			return false
		}
	}
	return true
}

// dominantShare is max over resources of amount / ceiling. zero reports that
// the queue holds or asks for a resource whose ceiling is 0; such a resource
// counts 1000 × amount (in whole units) and the queue goes after the others.
func (v queueView) dominantShare(withHead bool) (zero bool, share float64) {
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		amount := v.alloc.Get(r)
		if withHead {
			amount += v.head.Get(r)
		}
		if amount <= 0 {
			continue
		}
		c := ceiling(v.q, v.pool, r)
		var ratio float64
		if c <= 0 {
			zero = true
			ratio = 1000 * float64(amount) / float64(r.Unit())
		} else {
			ratio = float64(amount) / float64(c)
		}
		share = max(share, ratio)
	}
	return zero, share
}

// before reports whether sibling a goes before sibling b in allocate's order
// (SCHEDULING.md §3, rules 1 to 6).
func before(a, b queueView) bool {
	if x, y := a.aboveFairShare(), b.aboveFairShare(); x != y {
		return y
	}
	if x, y := a.withinDeserved(), b.withinDeserved(); x != y {
		return x
	}
	for _, withHead := range []bool{true, false} {
		za, sa := a.dominantShare(withHead)
		zb, sb := b.dominantShare(withHead)
		if za != zb {
			return zb
		}
		if sa < sb-tolerance {
			return true
		}
		if sb < sa-tolerance {
			return false
		}
	}
	if c := compareCeilings(a, b); c != 0 {
		return c < 0
	}
	if a.q.Order != b.q.Order {
		return a.q.Order < b.q.Order
	}
	return a.q.Name < b.q.Name
}

// compareCeilings is rule 5: -1 when a's ceiling is smaller or equal in every
// resource (and smaller in one), 1 for the reverse, 0 otherwise.
func compareCeilings(a, b queueView) int {
	le, ge, eq := true, true, true
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		ca, cb := ceiling(a.q, a.pool, r), ceiling(b.q, b.pool, r)
		le = le && ca <= cb
		ge = ge && ca >= cb
		eq = eq && ca == cb
	}
	switch {
	case eq:
		return 0
	case le:
		return -1
	case ge:
		return 1
	}
	return 0
}

// best returns the index of the view that goes first. Views come in creation
// order, so a partial order (rule 5) still gives one answer.
func best(vs []queueView) int {
	b := 0
	for i := 1; i < len(vs); i++ {
		if before(vs[i], vs[b]) {
			b = i
		}
	}
	return b
}

// victimOrder lists the projects j of project q may reclaim from in pool p,
// asking for req, in the reverse of allocate's order with no head request:
// the department allocate would serve last first, then the projects inside
// it the same way (the victim group order of reclaim). A project of another
// department passes the per-victim rule for its full allocation exactly
// when its department does, so such a department's projects are sorted
// once per change in it and kept for the cycle.
func (c *cycle) victimOrder(q *cluster.Queue, p *cluster.Pool, req cluster.Resources) []*cluster.Queue {
	var depts []*cluster.Queue
	byDept := map[*cluster.Queue][]*cluster.Queue{}
	for _, d := range c.s.Departments {
		var kept []*cluster.Queue
		if d == q.Parent {
			for _, v := range d.Children {
				if v != q && c.victimQueueOK(q, v, p, req) {
					kept = append(kept, v)
				}
			}
			kept = orderQueues(kept, p)
		} else if len(d.Children) > 0 && c.victimQueueOK(q, d.Children[0], p, req) {
			kept = c.orderedChildren(d, p)
		}
		if len(kept) > 0 {
			depts = append(depts, d)
			byDept[d] = kept
		}
	}
	var out []*cluster.Queue
	for _, d := range orderQueues(depts, p) {
		out = append(out, byDept[d]...)
	}
	slices.Reverse(out)
	return out
}

// orderedChildren is orderQueues of d's projects, kept until a binding or an
// eviction in d.
func (c *cycle) orderedChildren(d *cluster.Queue, p *cluster.Pool) []*cluster.Queue {
	key := poolQueue{d, p}
	if got, ok := c.orders[key]; ok && got.version == *c.queueChanges.at(d) {
		return got.queues
	}
	got := orderedQueues{queues: orderQueues(d.Children, p), version: *c.queueChanges.at(d)}
	c.orders[key] = got
	return got.queues
}

// orderedQueues is a department's projects in allocate's order, and the
// department's change count then.
type orderedQueues struct {
	queues  []*cluster.Queue
	version int
}

// orderQueues sorts siblings into allocate's order. Rule 5 is a partial
// order, so the comparison is not always transitive; a stable sort over
// creation order still gives one deterministic answer.
func orderQueues(qs []*cluster.Queue, p *cluster.Pool) []*cluster.Queue {
	vs := make([]queueView, len(qs))
	for i, q := range qs {
		vs[i] = view(q, p, cluster.Resources{})
	}
	sort.SliceStable(vs, func(a, b int) bool { return before(vs[a], vs[b]) })
	out := make([]*cluster.Queue, len(vs))
	for i, v := range vs {
		out[i] = v.q
	}
	return out
}
