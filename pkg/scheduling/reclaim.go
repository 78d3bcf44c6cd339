package scheduling

import (
	"fmt"
	"slices"
	"sort"

	"github.com/runwayhq/runway/pkg/cluster"
)

// homePool is where j's reclaim and preemption happen: the pool its pods are
// in, otherwise its first choice.
func (c *cycle) homePool(j *cluster.Workload) *cluster.Pool {
	if p := j.Pool(); p != nil {
		return p
	}
	return c.s.Pool(j.Pools[0])
}

// searchKey is everything a victim search reads of the workload it serves:
// two workloads with the same key get the same answer from the same state.
type searchKey struct {
	rule        Rule
	project     *cluster.Queue
	shape       shape
	priority    int
	preemptible bool
}

// noRoom is a search that found nothing, and the plan's size then.
type noRoom struct {
	why     Reason // zero: nothing to say (no candidates at all)
	version int
}

func (c *cycle) version() int { return c.changes }

// knownNoRoom reports (and explains) a search already known to fail now.
func (c *cycle) knownNoRoom(j *cluster.Workload, p *cluster.Pool, key searchKey) bool {
	miss, ok := c.noRoom[key]
	if ok && miss.version == c.version() {
		if miss.why.Check != 0 {
			c.because(j, p, miss.why)
		}
		return true
	}
	return false
}

func (c *cycle) rememberNoRoom(j *cluster.Workload, p *cluster.Pool, key searchKey, why Reason) {
	c.noRoom[key] = noRoom{why: why, version: c.version()}
	if why.Check != 0 {
		c.because(j, p, why)
	}
}

// reclaim tries to make room for j by evicting preemptible workloads of other
// projects (SCHEDULING.md §3 "Reclaim"). It reports whether j was placed.
func (c *cycle) reclaim(j *cluster.Workload) bool {
	c.on(StepReclaim, j)
	p := c.homePool(j)
	q := j.Project
	req := request(j, p)
	if why := c.gate(j, p, req); why.Check != 0 {
		c.because(j, p, why)
		return false
	}
	if checkOwnQuota(j, p, req).Check != 0 {
		return false // victims of other projects cannot lift its own limits
	}
	key := searchKey{rule: RuleReclaim, project: q, shape: shapeOf(j, p), preemptible: j.Priority.Preemptible}
	if c.knownNoRoom(j, p, key) {
		return false
	}
	queues := c.victimOrder(q, p, req)
	c.searches++
	sr := &search{c: c, j: j, pool: p, budget: c.cfg.SearchBound, id: c.searches, feed: feed{queues: queues}}
	c.scratch.lend(sr)
	defer c.scratch.keep(sr)
	// The after rule gets easier with victims of j's own department (its
	// department ends less saturated) when victims of another department are
	// taken too: then a set failing the rules may have a superset that passes.
	own, other, running := false, false, 0
	for _, v := range queues {
		own, other = own || v.Parent == q.Parent, other || v.Parent != q.Parent
		running += len(v.Running())
	}
	sr.rulesNotMonotone = own && other
	// The per-node search for a pod relies on the rules being monotone:
	// when they are not, search every set while there are few.
	sr.exact = sr.rulesNotMonotone && running <= exactGangUnits
	sr.rules = func(set []int) bool { return c.reclaimRules(j, p, req, sr.units, set) }
	// The rule reads only what the unit holds and the queues that lose it
	// below where the branches meet: a unit of another department, only
	// that department.
	sr.deadAlone = func(u *unit) bool {
		_, b := meeting(q, u.w.Project)
		m := c.dead.at(b)
		if m.search != sr.id {
			m.search, m.held, m.dead = sr.id, m.held[:0], m.dead[:0]
		}
		if i := slices.Index(m.held, u.held); i >= 0 {
			return m.dead[i]
		}
		d := !c.afterRule(q, p, req, []unit{*u}, []int{0})
		m.held, m.dead = append(m.held, u.held), append(m.dead, d)
		return d
	}
	sr.helps = func(u *unit) bool { return u.w.Project.Parent == q.Parent }
	set := sr.find()
	if set == nil {
		why := Reason{Check: CheckReclaim, Text: "reclaim: no set of victims both frees room for it and keeps every project's fair share"}
		if sr.pulledNone() {
			why.Text = "no other project holds more than its share of what it needs; nothing to reclaim"
		}
		c.rememberNoRoom(j, p, key, why)
		return false
	}
	if c.vetoed(j, p, CheckReclaim) || c.retakes(sr.units, set) {
		return false
	}
	for _, u := range evictions(sr.units, set) {
		// Read before evict removes the unit: the numbers are as they were.
		c.evict(u, RuleReclaim, j, reclaimReason(j, u, p))
	}
	return c.placeAfterEvictions(j, p)
}

// lowestPreemptible is the lowest priority value of a preemptible class.
var lowestPreemptible = func() int {
	low := cluster.Priorities[0].Value
	for _, p := range cluster.Priorities {
		if p.Preemptible {
			low = min(low, p.Value)
		}
	}
	return low
}()

// preempt tries to make room for j by evicting lower-priority preemptible
// workloads of its own project (SCHEDULING.md §3 "Preempt"). It reports
// whether j was placed.
func (c *cycle) preempt(j *cluster.Workload) bool {
	c.on(StepPreempt, j)
	if j.Priority.Value <= lowestPreemptible {
		return false // nothing preemptible ranks below it
	}
	p := c.homePool(j)
	key := searchKey{rule: RulePreempt, project: j.Project, shape: shapeOf(j, p), priority: j.Priority.Value,
		preemptible: j.Priority.Preemptible}
	if c.knownNoRoom(j, p, key) {
		return false
	}
	sr := &search{c: c, j: j, pool: p, budget: c.cfg.SearchBound, feed: feed{queues: []*cluster.Queue{j.Project},
		keep: func(w *cluster.Workload) bool { return w.Priority.Value < j.Priority.Value }}}
	need, crossed, r := settleNeed(j, p, request(j, p))
	if !need.IsZero() {
		// The settling rule asks for victims that free at least need: more
		// victims only help it, so every set is searched while there are few.
		sr.rules = func(set []int) bool { return freedCovers(sr.units, set, need) }
		sr.rulesNotMonotone, sr.rulesGrow, sr.exact = true, true, true
	}
	set := sr.find()
	if set == nil {
		why := Reason{Check: CheckPreempt, Text: "preempt: evicting every lower-priority workload of its project would not make room"}
		switch {
		case len(sr.units) == 0:
			why = Reason{}
		case crossed != nil:
			why.Queue = queueName(crossed)
			// Plain words for the rule (SCHEDULING.md §3: a preemption must
			// not take a queue above max(deserved, fair share)).
			why.Text = fmt.Sprintf("preempt: it would take %s %s above its quota and fair share (%s) unless the lower-priority workloads it evicts free %s; no set of them that makes room frees that much",
				crossed.Kind, crossed.Name, cluster.FormatAmount(r, ceiling(crossed, p, r)), cluster.Quantity(r, need.Get(r)))
		}
		c.rememberNoRoom(j, p, key, why)
		return false
	}
	if c.vetoed(j, p, CheckPreempt) || c.retakes(sr.units, set) {
		return false
	}
	for _, u := range evictions(sr.units, set) {
		c.evict(u, RulePreempt, j, fmt.Sprintf("%s (priority %s) of project %s needed %s; %s has priority %s",
			j.Name, j.Priority.Name, j.Project.Name, cluster.Quantity(cluster.GPU, request(j, p).GPU), u.w.Name, u.w.Priority.Name))
	}
	return c.placeAfterEvictions(j, p)
}

// settleNeed is what preempt's victims must free, per resource, for the
// settling rule (SCHEDULING.md §3 "Preempt"): j may not take its project, or
// an ancestor, above max(deserved, fair share) in a resource where it was
// within it. A queue with deserved unlimited is never above it. crossed and
// r name the first queue and resource that asks for the most.
func settleNeed(j *cluster.Workload, p *cluster.Pool, req cluster.Resources) (need cluster.Resources, crossed *cluster.Queue, r cluster.Resource) {
	for q := j.Project; q != nil; q = q.Parent {
		alloc := q.Usage[p.Index].Allocated
		for res := cluster.Resource(0); res < cluster.NumResources; res++ {
			if req.Get(res) == 0 || q.Quotas[p.Index].Deserved.Get(res) == cluster.Unlimited {
				continue
			}
			c := ceiling(q, p, res)
			if held := alloc.Get(res); held <= c && held+req.Get(res) > c && held+req.Get(res)-c > need.Get(res) {
				need = need.Set(res, held+req.Get(res)-c)
				crossed, r = q, res
			}
		}
	}
	return need, crossed, r
}

// freedCovers reports whether the set frees at least need in every resource.
func freedCovers(units []unit, set []int, need cluster.Resources) bool {
	var freed cluster.Resources
	for _, i := range set {
		freed = freed.Add(units[i].held)
	}
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		if freed.Get(r) < need.Get(r) {
			return false
		}
	}
	return true
}

func (c *cycle) placeAfterEvictions(j *cluster.Workload, p *cluster.Pool) bool {
	c.made(j)
	if !c.tryAllocate(j, p) {
		// The search proved this set makes room; reaching here is a bug.
		panic(InvariantError{Workload: j.ID, What: "the victims chosen did not make room"})
	}
	return true
}

// reclaimReason says who took what, and the numbers at the level where the
// two branches meet.
func reclaimReason(j *cluster.Workload, u unit, p *cluster.Pool) string {
	_, b := meeting(j.Project, u.w.Project)
	alloc := b.Usage[p.Index].Allocated.GPU
	quota := b.Quotas[p.Index].Deserved.GPU
	// The reclaimer's workload is another tenant's: its project is named,
	// the workload is not.
	return fmt.Sprintf("project %s reclaimed %s: %s %s held %s (deserved %s, fair share %s)",
		j.Project.Name, cluster.Quantity(cluster.GPU, u.held.GPU), b.Kind, b.Name, cluster.Quantity(cluster.GPU, alloc),
		deservedText(quota), cluster.FormatAmount(cluster.GPU, b.FairShare[p.Index].GPU))
}

func deservedText(d int64) string {
	if d == cluster.Unlimited {
		return "unlimited"
	}
	return cluster.FormatAmount(cluster.GPU, d)
}

// gate is the reclaim gate: the project stays within its fair share with j
// added, in every resource.
func (c *cycle) gate(j *cluster.Workload, p *cluster.Pool, req cluster.Resources) Reason {
	q := j.Project
	alloc, fs := q.Usage[p.Index].Allocated, q.FairShare[p.Index]
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		if alloc.Get(r)+req.Get(r) > fs.Get(r) {
			return Reason{Check: CheckReclaim, Queue: queueName(q), Requested: req, Available: underCap(r, fs.Get(r), alloc.Get(r)),
				Text: fmt.Sprintf("project %s would hold %s with it, above its fair share of %s; it cannot reclaim",
					q.Name, cluster.Quantity(r, alloc.Get(r)+req.Get(r)), cluster.FormatAmount(r, fs.Get(r)))}
		}
	}
	return Reason{}
}

// meeting returns the two queues where the branches of q and v meet: the
// projects themselves in one department, otherwise their departments.
func meeting(q, v *cluster.Queue) (a, b *cluster.Queue) {
	if q.Parent == v.Parent {
		return q, v
	}
	return q.Parent, v.Parent
}

// victimQueueOK is the per-victim rule for v's full allocation: a queue that
// fails it cannot give any victim.
func (c *cycle) victimQueueOK(q, v *cluster.Queue, p *cluster.Pool, req cluster.Resources) bool {
	a, b := meeting(q, v)
	return perVictim(a, b, p, req, b.Usage[p.Index].Allocated)
}

// perVictim: B, holding allocB before losing the victim, holds more than
// max(deserved, fair share) capped by limit in some resource J asks for; or A
// stays within deserved with J added and B holds more than deserved in some
// resource J asks for.
func perVictim(a, b *cluster.Queue, p *cluster.Pool, req, allocB cluster.Resources) bool {
	aWithin := true
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		if d := a.Quotas[p.Index].Deserved.Get(r); d != cluster.Unlimited && a.Usage[p.Index].Allocated.Get(r)+req.Get(r) > d {
			aWithin = false
		}
	}
	quota := b.Quotas[p.Index]
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		if req.Get(r) == 0 {
			// Only a resource J asks for counts: B above its share of GPUs
			// owes no CPU to a CPU-only J (and two projects would otherwise
			// take CPU and GPUs from each other in turn, cycle after cycle).
			continue
		}
		d := quota.Deserved.Get(r)
		// With deserved and limit both unlimited, no queue is ever above them.
		bounded := d != cluster.Unlimited || quota.EffectiveLimit(r) != cluster.Unlimited
		if bounded && allocB.Get(r) > ceiling(b, p, r) {
			return true
		}
		if aWithin && d != cluster.Unlimited && allocB.Get(r) > d {
			return true
		}
	}
	return false
}

// reclaimRules checks a victim set against the per-victim rule (each queue's
// victims in increasing GPUs, each seeing the earlier ones removed) and the
// after rule at every level from j's project up.
func (c *cycle) reclaimRules(j *cluster.Workload, p *cluster.Pool, req cluster.Resources, units []unit, set []int) bool {
	q := j.Project
	byB := map[*cluster.Queue][]int{}
	var bs []*cluster.Queue
	for _, i := range set {
		_, b := meeting(q, units[i].w.Project)
		if byB[b] == nil {
			bs = append(bs, b)
		}
		byB[b] = append(byB[b], i)
	}
	for _, b := range bs {
		idx := byB[b]
		sort.SliceStable(idx, func(x, y int) bool { return units[idx[x]].held.GPU < units[idx[y]].held.GPU })
		a, _ := meeting(q, units[idx[0]].w.Project)
		allocB := b.Usage[p.Index].Allocated
		for _, i := range idx {
			if !perVictim(a, b, p, req, allocB) {
				return false
			}
			allocB = allocB.Sub(units[i].held)
		}
	}
	return c.afterRule(q, p, req, units, set)
}

// afterRule: at every level from Q up, with X = J's side after J is placed
// and the victims removed, and each sibling S that loses victims, fail when
// alloc(X)/fs(X) > 1 and alloc(X)/fs(X) >= alloc(S)/fs(S) in a resource J
// asks for (fair share 0 on S's side skips S, unless X's is 0 too).
func (c *cycle) afterRule(q *cluster.Queue, p *cluster.Pool, req cluster.Resources, units []unit, set []int) bool {
	lost := map[*cluster.Queue]cluster.Resources{}
	for _, i := range set {
		for v := units[i].w.Project; v != nil; v = v.Parent {
			lost[v] = lost[v].Add(units[i].held)
		}
	}
	after := func(x *cluster.Queue) cluster.Resources {
		return x.Usage[p.Index].Allocated.Sub(lost[x])
	}
	for x := q; x != nil; x = x.Parent {
		var siblings []*cluster.Queue
		if x.Parent != nil {
			siblings = x.Parent.Children
		} else {
			siblings = c.s.Departments
		}
		ax := after(x).Add(req)
		for _, s := range siblings {
			if s == x || lost[s].IsZero() {
				continue
			}
			as := after(s)
			for r := cluster.Resource(0); r < cluster.NumResources; r++ {
				if req.Get(r) == 0 {
					continue
				}
				// Fair share 0 on S's side skips S, unless X's side has fair
				// share 0 too: then both are infinitely saturated, and taking
				// from S would only let S take it back next cycle (two
				// departments at fair share 0 whose projects each deserve the
				// same GPU would reclaim it from each other forever).
				fsS := s.FairShare[p.Index].Get(r)
				if fsS == 0 && x.FairShare[p.Index].Get(r) > 0 {
					continue
				}
				rx := ratio(ax.Get(r), x.FairShare[p.Index].Get(r))
				if rx > 1+tolerance && rx >= ratio(as.Get(r), fsS)-tolerance {
					return false
				}
			}
		}
	}
	return true
}

func ratio(alloc, fs int64) float64 {
	if fs <= 0 {
		if alloc <= 0 {
			return 0
		}
		return 1e18
	}
	return float64(alloc) / float64(fs)
}
