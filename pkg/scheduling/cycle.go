package scheduling

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/runwayhq/runway/pkg/cluster"
)

// cycle is the working memory of one Cycle call.
type cycle struct {
	s       *cluster.State
	cfg     Config
	plan    Plan
	touched map[*cluster.Workload]bool // gained pods this cycle
	// boundAt finds a pod bound in this cycle in plan.Bindings: evicting it
	// again in the same cycle drops the binding instead (see evict).
	boundAt map[cluster.PodRef]int
	// changes counts bindings and evictions (dropped bindings too): caches
	// of failed searches stay valid while it does not move.
	changes int
	freed   int // evictions (dropped bindings too): placement only gets harder between them
	reasons map[*cluster.Workload][]Reason
	// evicted holds the reasons of this cycle's evictions, which every
	// round's explanation keeps (see rounds).
	evicted map[*cluster.Workload][]Reason
	// placedFor is, per workload that evictions or moves made room for in
	// this try, the number of its latest such decision (see settle.go,
	// "Room taken again"); decided counts its decisions, vetoed ones too.
	placedFor, decided map[*cluster.Workload]int
	// vetoes are the decisions no try makes; retaken is the decision whose
	// room a search took in this try, which then stops (see Cycle).
	vetoes  map[decision]bool
	retaken decision
	// guard keeps placedFor out of the searches' candidates: the last try.
	guard bool
	// movedBy finds a moved workload's eviction in plan.Evictions.
	movedBy map[*cluster.Workload]int
	// queueChanges counts the bindings and evictions of each project's
	// workloads, and each department's, for the caches of victim
	// candidates (lists) and of the victim order of departments (orders).
	queueChanges perQueue[int]
	// touchedIn lists, per project, the workloads bound or evicted, in
	// order: what a candidate list must look at again.
	touchedIn map[*cluster.Queue][]*cluster.Workload
	lists     []perQueue[*candidateList] // per pool index
	orders    map[poolQueue]orderedQueues
	// deferred and searches serve the victim searches' deferred groups
	// (victimfeed.go).
	deferred perQueue[deferMark]
	// dead memoizes, per search, which amounts held fail the after rule
	// alone, per queue where the branches meet (see reclaim).
	dead     perQueue[deadMemo]
	scratch  scratch
	searches int
	noFit    map[shape]noFit
	// noRoom remembers victim searches that found nothing, valid while the
	// plan has not changed since.
	noRoom map[searchKey]noRoom
	// step and subject are what the cycle is working on (see on).
	step    Step
	subject *cluster.Workload
}

// Cycle computes fair shares and runs allocate, reclaim and preempt on s, and
// returns the plan. s is left as it was, except for the queues' FairShare,
// which the cycle sets from the state. Any panic comes out as an
// InvariantError naming the step and the workload it was working on; s is
// then left for the caller to roll back. A try whose searches take room
// made in it starts over without that decision (settle.go, "Room taken
// again").
func Cycle(s *cluster.State, cfg Config) Plan {
	if cfg.SearchBound <= 0 {
		cfg.SearchBound = DefaultConfig().SearchBound
	}
	ComputeFairShares(s)
	vetoes := map[decision]bool{}
	for try := 1; ; try++ {
		c := &cycle{s: s, cfg: cfg, touched: map[*cluster.Workload]bool{}, boundAt: map[cluster.PodRef]int{},
			reasons: map[*cluster.Workload][]Reason{}, evicted: map[*cluster.Workload][]Reason{},
			placedFor: map[*cluster.Workload]int{}, decided: map[*cluster.Workload]int{},
			vetoes: vetoes, guard: try == maxTries,
			movedBy: map[*cluster.Workload]int{}, touchedIn: map[*cluster.Queue][]*cluster.Workload{},
			lists: make([]perQueue[*candidateList], len(s.Pools)), orders: map[poolQueue]orderedQueues{},
			noFit: map[shape]noFit{}, noRoom: map[searchKey]noRoom{}}
		if plan, done := c.run(); done {
			return plan
		}
		vetoes[c.retaken] = true
	}
}

// run is one try of Cycle: false when a search took room made in it
// (c.retaken), with s rolled back.
func (c *cycle) run() (Plan, bool) {
	defer func() {
		if r := recover(); r != nil {
			panic(c.contain(r))
		}
	}()
	mark := c.s.Mark()
	c.gangTimeouts()
	c.settle()
	c.step, c.subject = "", nil
	if c.retaken.w != nil {
		c.s.Rollback(mark)
		return Plan{}, false
	}
	c.explain()
	c.dropUnbound()
	c.s.Rollback(mark)
	c.s.StopLog()
	return c.plan, true
}

// gangTimeouts evicts workloads that held fewer pods than their minimum for
// GangTimeout (SCHEDULING.md §4).
func (c *cycle) gangTimeouts() {
	for _, w := range c.s.BelowMinimum() {
		if w.BelowMinSince < 0 || c.cfg.Now-w.BelowMinSince < c.cfg.GangTimeout || w.Aside {
			continue
		}
		c.on(StepGangMinimum, w)
		why := fmt.Sprintf("held %d of its minimum %d pods for %s", w.PlacedPods(), w.MinPods, c.cfg.GangTimeout)
		c.evict(unit{w: w, pods: placedPods(w)}, RuleGangMinimum, nil, why)
	}
}

func (c *cycle) because(w *cluster.Workload, p *cluster.Pool, why Reason) {
	why.Pool = p.Name
	if len(w.Pools) > 1 {
		why.Text = "node pool " + p.Name + ": " + why.Text
	}
	c.reasons[w] = append(c.reasons[w], why)
}

func (c *cycle) bind(w *cluster.Workload, pods []int) {
	c.touched[w] = true
	c.changes++
	c.changed(w)
	delete(c.reasons, w)
	for _, pod := range pods {
		at := w.Placed[pod]
		c.boundAt[cluster.PodRef{Workload: w, Pod: pod}] = len(c.plan.Bindings)
		c.plan.Bindings = append(c.plan.Bindings, Binding{
			Workload: w.ID, Pod: pod, Node: at.Node.Name,
			Devices: append([]int(nil), at.Devices...), Share: at.Share,
		})
	}
}

// evict removes a unit's pods from the state and records the eviction. A
// unit that is the whole workload is recorded with Pods nil. Pods bound
// earlier in this cycle are not evicted but lose their binding: the plan
// never places a pod only to stop it, and a second cycle has nothing left
// to take back from work that allocate placed ahead of its turn.
func (c *cycle) evict(u unit, rule Rule, forW *cluster.Workload, why string) {
	whole := len(u.pods) == u.w.PlacedPods()
	pool := ""
	if n := u.w.Placed[u.pods[0]].Node; n != nil {
		pool = n.Pool.Name
	}
	var running []int // pods that ran before this cycle
	for _, pod := range u.pods {
		ref := cluster.PodRef{Workload: u.w, Pod: pod}
		if i, ok := c.boundAt[ref]; ok {
			c.plan.Bindings[i].Workload = "" // dropped by dropUnbound
			delete(c.boundAt, ref)
		} else {
			running = append(running, pod)
		}
		c.s.Unplace(u.w, pod)
	}
	c.changes++
	c.freed++
	c.changed(u.w)
	what := "placed in this cycle, then its room was taken"
	if i, ok := c.movedBy[u.w]; ok && len(running) == 0 {
		// Moved by consolidation, then taken: the move becomes this eviction.
		delete(c.movedBy, u.w)
		e := &c.plan.Evictions[i]
		e.Rule, e.Reason, e.For = rule, why, ""
		if forW != nil {
			e.For = forW.ID
		}
		what = "evicted"
	}
	if len(running) > 0 {
		e := Eviction{Workload: u.w.ID, Rule: rule, Reason: why}
		if !whole {
			e.Pods = running
		}
		if forW != nil {
			e.For = forW.ID
		}
		c.plan.Evictions = append(c.plan.Evictions, e)
		what = "evicted"
		if !whole {
			what = fmt.Sprintf("%d pod(s) evicted", len(running))
		}
	}
	c.evicted[u.w] = append(c.evicted[u.w], Reason{Check: ruleChecks[rule], Pool: pool,
		Text: fmt.Sprintf("%s (%s): %s", what, rule, why)})
}

// changed counts a binding or an eviction of w in its project and its
// department.
func (c *cycle) changed(w *cluster.Workload) {
	c.touchedIn[w.Project] = append(c.touchedIn[w.Project], w)
	for q := w.Project; q != nil; q = q.Parent {
		*c.queueChanges.at(q)++
	}
}

// perQueue holds one T per queue, indexed by creation order: the caches
// the victim search reads for hundreds of queues per reclaim.
type perQueue[T any] []T

// at returns q's entry, growing the table as needed.
func (t *perQueue[T]) at(q *cluster.Queue) *T {
	if q.Order >= len(*t) {
		*t = append(*t, make([]T, q.Order+1-len(*t))...)
	}
	return &(*t)[q.Order]
}

// grew reports whether the plan binds a pod of w.
func (c *cycle) grew(w *cluster.Workload) bool {
	for pod := range w.Placed {
		if _, ok := c.boundAt[cluster.PodRef{Workload: w, Pod: pod}]; ok {
			return true
		}
	}
	return false
}

// dropUnbound removes the bindings that a later eviction in the cycle undid.
func (c *cycle) dropUnbound() {
	kept := c.plan.Bindings[:0]
	for _, b := range c.plan.Bindings {
		if b.Workload != "" {
			kept = append(kept, b)
		}
	}
	c.plan.Bindings = kept
}

// explain lists every workload still waiting with its reasons.
func (c *cycle) explain() {
	for _, q := range c.s.Projects() {
		var ws []*cluster.Workload
		for w := range q.Waiting() {
			ws = append(ws, w)
		}
		sortBySeq(ws)
		for _, w := range ws {
			if w.PlacedPods() >= w.MinPods && c.grew(w) {
				continue // an elastic workload that grew: nothing to explain
			}
			// Every path that leaves a workload waiting records why; the
			// property tests fail on an empty list rather than a made-up one.
			c.plan.Waiting = append(c.plan.Waiting, Waiting{Workload: w.ID, Reasons: append(c.evicted[w], c.reasons[w]...)})
		}
	}
}

// Apply makes a plan real on s at time now: evicted workloads go back to
// Pending (one more preemption) or lose the named pods; bound pods are placed
// and a workload holding its minimum is Running.
func Apply(s *cluster.State, plan Plan, now time.Duration) error {
	for _, e := range plan.Evictions {
		w := s.Workload(e.Workload)
		if w == nil {
			return fmt.Errorf("apply eviction: workload %q does not exist", e.Workload)
		}
		pods := e.Pods
		if pods == nil {
			pods = placedPods(w)
		}
		for _, pod := range pods {
			if pod < 0 || pod >= len(w.Placed) || w.Placed[pod].Node == nil {
				return fmt.Errorf("apply eviction: pod %d of %q is not placed", pod, e.Workload)
			}
			s.Unplace(w, pod)
		}
		if w.PlacedPods() == 0 && e.Rule != RuleConsolidation {
			Requeue(s, w) // a moved workload is bound again by the same plan
		}
	}
	for _, b := range plan.Bindings {
		w, n := s.Workload(b.Workload), s.Node(b.Node)
		if w == nil || n == nil {
			return fmt.Errorf("apply binding: workload %q or node %q does not exist", b.Workload, b.Node)
		}
		if b.Pod < 0 || b.Pod >= len(w.Placed) || w.Placed[b.Pod].Node != nil {
			return fmt.Errorf("apply binding: pod %d of %q is already placed", b.Pod, b.Workload)
		}
		s.Place(w, b.Pod, n, b.Devices, b.Share)
		if w.Phase == cluster.Pending && w.PlacedPods() >= w.MinPods {
			w.Phase = cluster.Running
			if w.FirstRunning < 0 {
				w.FirstRunning = now
			}
		}
	}
	for _, e := range plan.Evictions {
		if w := s.Workload(e.Workload); e.Rule == RuleConsolidation && w.PlacedPods() == 0 {
			Requeue(s, w) // moved but not bound again (the plan lost it)
		}
	}
	s.StampBelowMinimum(now)
	return nil
}

// Requeue sends a workload that lost all its pods back to Pending, counting
// one more preemption.
func Requeue(s *cluster.State, w *cluster.Workload) {
	if w.Phase == cluster.Running {
		w.Phase = cluster.Pending
		w.Preemptions++
	}
}

// placedPods lists w's placed pods in the order they were placed (the last
// placed last): units take an elastic workload's extra pods from the end.
func placedPods(w *cluster.Workload) []int {
	var out []int
	for i, p := range w.Placed {
		if p.Node != nil {
			out = append(out, i)
		}
	}
	// Usually already in order; ties (pods bound in one etcd transaction
	// share a revision) keep index order, as PlacedLater reads them.
	byOrder := func(a, b int) int { return cmp.Compare(w.Placed[a].Order, w.Placed[b].Order) }
	if !slices.IsSortedFunc(out, byOrder) {
		slices.SortStableFunc(out, byOrder)
	}
	return out
}
