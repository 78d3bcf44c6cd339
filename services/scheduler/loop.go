package scheduler

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// leadership is what this replica knows while it leads.
type leadership struct {
	fence   fence
	acquire time.Time
}

// Run keeps the cache and takes part in the election until ctx ends. While
// it leads it runs a cycle every Config.Interval and after every change the
// cache sees (debounced by Config.Debounce).
func (s *Server) Run(ctx context.Context) error {
	cacheCtx, stopCache := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.cache.Run(cacheCtx)
	}()
	defer func() {
		stopCache()
		<-done
	}()
	for ctx.Err() == nil {
		if err := s.lead(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("scheduler: election", "replica", s.cfg.Replica, "err", err)
			t := time.NewTimer(200 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
	return nil
}

// lead campaigns with a new session, then schedules until the session or
// ctx ends. The session is closed (its lease revoked, so the key goes at
// once and another replica takes over) on the way out.
func (s *Server) lead(ctx context.Context) error {
	// The session outlives ctx on purpose: Close must still be able to
	// revoke the lease after ctx is cancelled.
	sess, err := concurrency.NewSession(s.client, concurrency.WithTTL(s.cfg.SessionTTL),
		concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return err
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, etcdstore.PrefixElectionScheduler)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // a lost session also ends a campaign in progress
		select {
		case <-sess.Done():
			cancel()
		case <-cctx.Done():
		}
	}()
	// While it waits, the campaign follows the leader, to see it go.
	fl := s.followCampaign(cctx, sess.Lease())
	defer fl.wait()
	err = el.Campaign(cctx, electionValue(s.cfg.Replica, s.Address()))
	won := time.Now()
	fl.ended(s, err == nil, won)
	if err != nil {
		if cctx.Err() != nil {
			return nil
		}
		return err
	}
	go s.stepDownWhenDeposed(cctx, cancel, el.Key(), el.Rev())
	s.setLeader(&leadership{fence: fence{Key: el.Key(), Rev: el.Rev()}, acquire: s.cfg.Clock()})
	defer s.setLeader(nil)
	s.log.Info("scheduler: leading", "replica", s.cfg.Replica, "electionRevision", el.Rev())
	written, err := loadReasons(cctx, s.client)
	if err != nil {
		if cctx.Err() != nil {
			return nil
		}
		return err
	}
	s.written = written
	if s.usage, err = loadUsage(cctx, s.client); err != nil {
		if cctx.Err() != nil {
			return nil
		}
		return err
	}
	if s.cfg.WhileLeading != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := s.cfg.WhileLeading(cctx); err != nil && cctx.Err() == nil {
				s.log.Error("scheduler: leader's runtime stopped", "replica", s.cfg.Replica, "err", err)
			}
		}()
		defer func() { cancel(); <-done }()
	}
	ready := time.Now()
	s.metrics.failover.WithLabelValues(phaseReady).Observe(ready.Sub(won).Seconds())
	s.schedule(cctx, fence{Key: el.Key(), Rev: el.Rev()}, ready)
	return nil
}

// schedule is the leader's loop: a cycle per tick or per debounced change.
// The first cycle runs at once; ready is when leading began to plan.
func (s *Server) schedule(ctx context.Context, f fence, ready time.Time) {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	first := true
	for {
		if planned := s.cycle(ctx, f); first && !planned.IsZero() {
			first = false
			s.metrics.failover.WithLabelValues(phaseFirstCycle).Observe(planned.Sub(ready).Seconds())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.cache.Changed():
			t := time.NewTimer(s.cfg.Debounce)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// cycle runs scheduling.Cycle on the cache's state, writes the plan fenced
// by f, and waits until the cache has seen the write, so the next cycle
// starts from the state the plan made. A model that has not caught up with
// the last plan's writes is never planned on: the cycle is skipped (and
// counted) until it has. It returns when its plan was written (or found
// nothing to write); zero when it did not plan (skipped, or the model not
// yet read).
func (s *Server) cycle(ctx context.Context, f fence) time.Time {
	c := s.cache
	if s.behind != nil {
		if !c.WaitApplied(ctx, s.behind.ws, s.behind.rev, s.cfg.ApplyWait) {
			s.metrics.modelBehind.Inc()
			s.log.Warn("scheduler: the model has not seen the last plan's writes; cycle skipped",
				"replica", s.cfg.Replica, "revision", s.behind.rev)
			return time.Time{}
		}
		s.behind = nil
	}
	now := s.cfg.Clock()
	c.mu.Lock()
	if !c.ready {
		c.mu.Unlock()
		return time.Time{}
	}
	c.expireGraces(now)
	s.usage.accrue(c.state, now)
	start := time.Now()
	plan, ok := s.runCycle(now)
	var ws writes
	if ok {
		ws, ok = s.planWritesContained(plan, now)
	}
	if !ok {
		c.mu.Unlock()
		s.writeAsideEvents(ctx, f, now)
		return time.Now()
	}
	var usage map[string]*schedulerv1.QueueUsage
	ws.usage, usage = s.usage.writes(c.state, now, s.cfg.UsageInterval)
	pools := c.poolsOf(plan)
	c.mu.Unlock()
	s.metrics.cycle.WithLabelValues(actionSchedule).Observe(time.Since(start).Seconds())
	s.writeAsideEvents(ctx, f, now)
	var reasons map[string]string
	ws.reasons, reasons = reasonsWrites(s.written, plan.Waiting)
	if ws.empty() {
		s.recordCycle(plan, pools, now, applied{}, nil)
		s.usage.committed(usage, now)
		return time.Now()
	}
	start = time.Now()
	res, err := apply(ctx, s.client, f, ws, s.cfg.MaxOps)
	written := time.Now()
	took := written.Sub(start).Seconds()
	s.metrics.apply.Observe(took)
	s.metrics.cycle.WithLabelValues(actionApply).Observe(took)
	for wid, why := range res.dropped {
		s.metrics.planDropped.Inc()
		s.log.Error("scheduler: workload's plan not written", "replica", s.cfg.Replica, "workload", wid, "err", why)
	}
	if errors.Is(err, etcdstore.ErrConflict) {
		s.metrics.conflicts.Inc()
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("scheduler: plan not applied", "replica", s.cfg.Replica, "err", err)
	}
	s.recordCycle(plan, pools, now, res, err)
	if err == nil {
		s.metrics.applied(plan)
		s.written = reasons
		s.usage.committed(usage, now)
	}
	// What was committed must be in the model before the next plan. (A
	// transaction whose reply was lost may have committed too; the next
	// plan's create-if-absent conditions refuse to bind over it.)
	start = time.Now()
	if res.bindingRev > 0 && !c.WaitApplied(ctx, res.done, res.bindingRev, s.cfg.ApplyWait) {
		s.behind = &behind{ws: res.done, rev: res.bindingRev}
	}
	s.metrics.cycle.WithLabelValues(actionWait).Observe(time.Since(start).Seconds())
	return written
}

// behind is a plan's writes the model has not shown yet.
type behind struct {
	ws  writes
	rev int64
}
