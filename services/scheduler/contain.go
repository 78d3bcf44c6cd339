package scheduler

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// runCycle runs the scheduling core on the cache's state (locked by the
// caller). A failed invariant in the core (a panic) must not take the
// replica down with the lock held, nor each next leader after it: the
// state is rolled back to where the cycle found it, the plan is dropped,
// the failure is counted and logged with the state that caused it, and
// the workload being placed is set aside (hold) so the next cycle
// schedules the others. ok is false when the plan was dropped.
func (s *Server) runCycle(now time.Time) (plan scheduling.Plan, ok bool) {
	c := s.cache
	mark := c.state.Mark()
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		c.state.Rollback(mark)
		c.state.StopLog()
		s.metrics.invariantFailures.Inc()
		inv, isInv := r.(scheduling.InvariantError)
		if !isInv {
			inv = scheduling.InvariantError{What: fmt.Sprint(r)}
		}
		s.log.Error("scheduler: invariant failed; plan dropped", "replica", s.cfg.Replica,
			"workload", inv.Workload, "what", inv.What, "state", c.summary())
		if inv.Workload != "" && c.hold(inv.Workload) {
			s.held[inv.Workload] = "The scheduler set this workload aside: " + inv.What +
				" (an internal check failed; it is retried when its spec changes or the scheduler restarts)."
		}
		plan, ok = scheduling.Plan{}, false
	}()
	cfg := s.cfg.Scheduling
	cfg.Now = since(now)
	plan = s.cfg.cycle(c.state, cfg)
	// Set-aside workloads wait, and say why.
	for id, why := range s.held {
		if !c.isHeld(id) {
			delete(s.held, id)
			continue
		}
		plan.Waiting = append(plan.Waiting, scheduling.Waiting{Workload: id, Reasons: []scheduling.Reason{{Text: why}}})
	}
	return plan, true
}

// hold takes a workload that holds no pods out of the model until its spec
// changes; false if it cannot (it is not there, or holds pods whose room
// the model must keep counting). Called with mu held.
func (c *Cache) hold(id string) bool {
	w := c.state.Workload(id)
	raw := c.workloads[id]
	if w == nil || raw == nil || w.PlacedPods() > 0 {
		return false
	}
	c.state.Remove(w)
	delete(c.submitted, id)
	c.held[id] = proto.Clone(raw.GetSpec()).(*workloadv1.WorkloadSpec)
	return true
}

// isHeld reports whether id is set aside. Called with mu held.
func (c *Cache) isHeld(id string) bool {
	_, ok := c.held[id]
	return ok
}

// summary describes the model in one line for a log.
func (c *Cache) summary() string {
	return fmt.Sprintf("%d pools, %d nodes, %d workloads, %d bindings, bindings revision %d",
		len(c.state.Pools), len(c.nodes), len(c.state.Workloads()), len(c.bindings), c.bindingRev)
}

// poolsOf names, per workload of the plan, the node pool its decision
// concerns: where it was bound, where it was evicted from, or the first
// pool it waits for. Called with mu held, on the state the plan was
// computed from.
func (c *Cache) poolsOf(plan scheduling.Plan) map[string]string {
	out := map[string]string{}
	for _, b := range plan.Bindings {
		if n := c.state.Node(b.Node); n != nil {
			out[b.Workload] = "nodepools/" + n.Pool.Name
		}
	}
	for _, e := range plan.Evictions {
		if w := c.state.Workload(e.Workload); w != nil && w.Pool() != nil {
			out[e.Workload] = "nodepools/" + w.Pool().Name
		}
	}
	for _, w := range plan.Waiting {
		switch {
		case len(w.Reasons) > 0 && w.Reasons[0].Pool != "":
			out[w.Workload] = "nodepools/" + w.Reasons[0].Pool
		case c.state.Workload(w.Workload) != nil && len(c.state.Workload(w.Workload).Pools) > 0:
			out[w.Workload] = "nodepools/" + c.state.Workload(w.Workload).Pools[0]
		}
	}
	return out
}
