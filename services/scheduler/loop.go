package scheduler

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/scheduling"
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
	if err := el.Campaign(cctx, s.cfg.Replica); err != nil {
		if cctx.Err() != nil {
			return nil
		}
		return err
	}
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
	s.schedule(cctx, fence{Key: el.Key(), Rev: el.Rev()})
	return nil
}

// schedule is the leader's loop: a cycle per tick or per debounced change.
func (s *Server) schedule(ctx context.Context, f fence) {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		s.cycle(ctx, f)
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
// starts from the state the plan made.
func (s *Server) cycle(ctx context.Context, f fence) {
	now := s.cfg.Clock()
	c := s.cache
	c.mu.Lock()
	if !c.ready {
		c.mu.Unlock()
		return
	}
	c.expireMissing(now)
	cfg := s.cfg.Scheduling
	cfg.Now = since(now)
	plan := scheduling.Cycle(c.state, cfg)
	ws := c.planWrites(plan, now)
	c.mu.Unlock()
	s.recordCycle(plan, now)
	var written map[string]string
	ws.reasons, written = reasonsWrites(s.written, plan.Waiting)
	if ws.empty() {
		return
	}
	_, err := apply(ctx, s.client, f, ws, s.cfg.MaxOps)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.log.Warn("scheduler: plan not applied", "replica", s.cfg.Replica, "err", err)
		}
		return
	}
	s.written = written
	c.WaitApplied(ctx, ws, 2*time.Second)
}
