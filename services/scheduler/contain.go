package scheduler

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// stepApply is the step of a failure while the plan's writes are built.
const stepApply scheduling.Step = "apply"

// runCycle runs the scheduling core on the cache's state (locked by the
// caller). A panic of any step of the core must not take the replica down
// with the lock held, nor each next leader after it, nor stall the
// cluster: the state is rolled back to where the cycle found it, the plan
// is dropped, and the workload the step was working on is set aside
// (setAside), so the next cycle schedules every other. ok is false when
// the plan was dropped.
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
		inv, isInv := r.(scheduling.InvariantError)
		if !isInv {
			inv = scheduling.InvariantError{What: fmt.Sprint(r)}
		}
		s.setAside(inv, now)
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

// planWritesContained is planWrites with a panic contained like one of the
// core's: the plan is dropped and the workload whose writes were being
// built is set aside. Called with mu held.
func (s *Server) planWritesContained(plan scheduling.Plan, now time.Time) (ws writes, ok bool) {
	c := s.cache
	c.writing = ""
	defer func() {
		if r := recover(); r != nil {
			s.setAside(scheduling.InvariantError{Workload: c.writing, Step: stepApply, What: fmt.Sprint(r)}, now)
			ws, ok = writes{}, false
		}
	}()
	return c.planWrites(plan, now), true
}

// setAside counts and logs a contained failure and sets its workload aside
// with a reason it shows and a SET_ASIDE event. Called with mu held.
func (s *Server) setAside(inv scheduling.InvariantError, now time.Time) {
	c := s.cache
	s.metrics.invariantFailures.Inc()
	step := string(inv.Step)
	if step == "" {
		step = "none"
	}
	s.log.Error("scheduler: invariant failed; plan dropped", "replica", s.cfg.Replica,
		"workload", inv.Workload, "step", step, "what", inv.What, "state", c.summary())
	if inv.Workload == "" || !c.hold(inv.Workload) {
		return
	}
	s.metrics.setAside.WithLabelValues(step).Inc()
	// What failed stays in the log: a panic's text may name other
	// tenants' workloads, and the reason and event are the owner's to read.
	what := "a step of the scheduler"
	if inv.Step != "" {
		what = fmt.Sprintf("the scheduler's %s step", inv.Step)
	}
	why := "The scheduler set this workload aside: " + what + " failed on it (an internal check; the scheduler's log says what)." +
		" It is retried when its spec changes or the scheduler restarts."
	s.held[inv.Workload] = why
	s.asideEvents = append(s.asideEvents, asideEvent{workload: inv.Workload, ev: &workloadv1.WorkloadEvent{
		Type: workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SET_ASIDE, Time: timestamppb.New(now), Message: why}})
}

// asideEvent is a SET_ASIDE event waiting to be written.
type asideEvent struct {
	workload string
	ev       *workloadv1.WorkloadEvent
}

// writeAsideEvents writes the pending SET_ASIDE events, fenced like a plan;
// those not written are tried again before the next cycle.
func (s *Server) writeAsideEvents(ctx context.Context, f fence, now time.Time) {
	if len(s.asideEvents) == 0 {
		return
	}
	var pb planBuilder
	for i, a := range s.asideEvents {
		key := fmt.Sprintf("%s%s/%020d-a%d", etcdstore.PrefixEvictions, a.workload, now.UnixNano(), i)
		pb.add(a.workload, write{key: key, msg: a.ev})
	}
	if _, err := apply(ctx, s.client, f, pb.out, s.cfg.MaxOps); err != nil {
		s.log.Warn("scheduler: set-aside events not written", "replica", s.cfg.Replica, "err", err)
		return
	}
	s.asideEvents = nil
}

// hold sets a workload aside until its spec changes: one that holds no pods
// leaves the model; one that holds pods stays (its room is counted) marked
// Aside, which cycles neither place, evict nor move. false if it is not
// there. Called with mu held.
func (c *Cache) hold(id string) bool {
	w := c.state.Workload(id)
	raw := c.workloads[id]
	if w == nil || raw == nil {
		return false
	}
	if w.PlacedPods() > 0 {
		w.Aside = true
	} else {
		c.state.Remove(w)
		delete(c.submitted, id)
	}
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
