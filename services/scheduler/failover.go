package scheduler

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/runwayhq/runway/pkg/etcdstore"
)

// A replica that does not lead follows the one that does, so that a
// leader killed (which cannot resign) is replaced at once rather than when
// its lease's TTL runs out: the follower holds a gRPC health stream to the
// leader's advertised address, and when that stream ends and the address
// refuses connections, it revokes the leader's lease (revokeGone). A
// leader that hangs, or whose host is gone, still goes with its TTL.
//
// Phases of a takeover, the phase label of
// runway_scheduler_failover_phase_seconds, as the replica that takes over
// sees them: the leader's process seen gone (its connection to it closed and
// its address refusing connections) → the leader's election key deleted
// (lease), → this replica's campaign won (elect), → its leader's records
// read and its model ready (ready), → its first cycle that planned ended,
// the plan written (first_cycle). A phase whose start this replica did not
// see (a leader key that expired with no connection to its process, a first
// leader) is not observed.
const (
	phaseLease      = "lease"
	phaseElect      = "elect"
	phaseReady      = "ready"
	phaseFirstCycle = "first_cycle"
)

func newFailoverPhases() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "runway_scheduler_failover_phase_seconds",
		Help: "Time each phase of taking over the scheduler's leadership took on the replica that took over " +
			"(lease: the leader seen gone until its key was deleted; elect: until this replica led; " +
			"ready: until its model and records were ready; first_cycle: until its first plan was written).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"phase"})
}

// takeover is one campaign's timeline, written by watchLeader while the
// campaign waits and read once it is won.
type takeover struct {
	mu   sync.Mutex
	lost time.Time // the leader's process was seen gone
	gone time.Time // the leader's election key was seen deleted
}

func (tk *takeover) set(at *time.Time, now time.Time) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	*at = now
}

func (tk *takeover) times() (lost, gone time.Time) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return tk.lost, tk.gone
}

// observeWon records the phases of a campaign won at won.
func (s *Server) observeWon(tk *takeover, won time.Time) {
	lost, gone := tk.times()
	if gone.IsZero() {
		return
	}
	if !lost.IsZero() && !gone.Before(lost) {
		s.metrics.failover.WithLabelValues(phaseLease).Observe(gone.Sub(lost).Seconds())
	}
	s.metrics.failover.WithLabelValues(phaseElect).Observe(max(won.Sub(gone), 0).Seconds())
}

// follower is watchLeader running beside one campaign.
type follower struct {
	tk       takeover
	stop     context.CancelFunc
	done     chan struct{} // watchLeader returned
	observed chan struct{} // ended's work is over
}

func (s *Server) followCampaign(ctx context.Context, own clientv3.LeaseID) *follower {
	wctx, stop := context.WithCancel(ctx)
	f := &follower{stop: stop, done: make(chan struct{}), observed: make(chan struct{})}
	go func() {
		defer close(f.done)
		s.watchLeader(wctx, own, &f.tk)
	}()
	return f
}

// ended is called once the campaign has returned at at. Won, the watcher
// is left to see the old key's delete (the campaign may see it first; the
// watcher then ends by itself, or is stopped after a second), and the
// phases are recorded, without holding up the new leader.
func (f *follower) ended(s *Server, won bool, at time.Time) {
	if !won {
		f.stop()
		close(f.observed)
		return
	}
	go func() {
		defer close(f.observed)
		t := time.AfterFunc(time.Second, f.stop)
		<-f.done
		t.Stop()
		s.observeWon(&f.tk, at)
	}()
}

// wait stops the watcher and waits until ended's work is over.
func (f *follower) wait() {
	f.stop()
	<-f.done
	<-f.observed
}

// watchLeader follows, while this replica campaigns, the replica that
// leads: its election key in etcd, and a gRPC health stream to the address
// it advertises. It returns when this replica's key (of lease own) is
// first, or ctx ends.
func (s *Server) watchLeader(ctx context.Context, own clientv3.LeaseID, tk *takeover) {
	for ctx.Err() == nil {
		resp, err := s.client.Get(ctx, etcdstore.PrefixElectionScheduler+"/", clientv3.WithFirstCreate()...)
		if err == nil && len(resp.Kvs) > 0 && clientv3.LeaseID(resp.Kvs[0].Lease) == own {
			return
		}
		if err != nil || len(resp.Kvs) == 0 {
			// No key yet (this replica's campaign is about to put its
			// own), or etcd did not answer: look again shortly.
			if !sleepCtx(ctx, 100*time.Millisecond) {
				return
			}
			continue
		}
		s.followLeader(ctx, resp.Kvs[0], resp.Header.Revision, tk)
	}
}

// followLeader returns when the leader's key kv is deleted (or ctx ends).
func (s *Server) followLeader(ctx context.Context, kv *mvccpb.KeyValue, rev int64, tk *takeover) {
	fctx, cancel := context.WithCancel(ctx)
	gone, probed := make(chan struct{}), make(chan struct{})
	defer func() {
		cancel()
		<-probed
	}()
	_, address := parseElectionValue(string(kv.Value))
	go func() {
		defer close(probed)
		if dialable(address) && s.processGone(fctx, address) {
			close(gone)
		}
	}()
	events := s.client.Watch(fctx, string(kv.Key), clientv3.WithRev(rev+1))
	for {
		select {
		case <-fctx.Done():
			return
		case <-gone:
			gone = nil
			tk.set(&tk.lost, time.Now())
			s.revokeGone(fctx, kv, address)
		case wr, ok := <-events:
			if !ok || wr.Err() != nil {
				return // looked up again
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					tk.set(&tk.gone, time.Now())
					return
				}
			}
		}
	}
}

// revokeGone revokes the lease of the leader's key kv, whose process is
// gone, rather than wait for its TTL: a process killed cannot resign. Only
// if the key is still the one followed, on the same lease: a lease is one
// session's, so nothing else goes with it. Were the process alive after
// all, its session would end with its lease, and its plans, fenced on the
// key's create revision, would fail.
func (s *Server) revokeGone(ctx context.Context, kv *mvccpb.KeyValue, address string) {
	resp, err := s.client.Get(ctx, string(kv.Key))
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != kv.CreateRevision || resp.Kvs[0].Lease != kv.Lease {
		return
	}
	if _, err := s.client.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("scheduler: the leader's process is gone; its lease not revoked", "replica", s.cfg.Replica,
				"leaderAddress", address, "err", err)
		}
		return
	}
	s.metrics.leasesRevoked.Inc()
	s.log.Info("scheduler: the leader's process is gone; its lease revoked", "replica", s.cfg.Replica,
		"leaderAddress", address, "electionRevision", kv.CreateRevision)
}

// stepDownWhenDeposed ends this leader's leadership (cancel) once its
// election key (created at created) is deleted: another replica revoked
// its lease, or the lease expired. Its session would notice only at its
// next keepalive, a third of the TTL later; until it steps down, the fence
// refuses each of its plans.
func (s *Server) stepDownWhenDeposed(ctx context.Context, cancel context.CancelFunc, key string, created int64) {
	from := created
	for ctx.Err() == nil {
		for wr := range s.client.Watch(ctx, key, clientv3.WithRev(from)) {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					s.log.Warn("scheduler: this leader's election key was deleted; stepping down", "replica", s.cfg.Replica,
						"electionRevision", created)
					cancel()
					return
				}
				from = ev.Kv.ModRevision + 1
			}
			if wr.Err() != nil {
				break
			}
		}
		// The watch ended (compacted past from, say): look at the key
		// itself and watch on from there.
		resp, err := s.client.Get(ctx, key)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			sleepCtx(ctx, 100*time.Millisecond)
		case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != created:
			s.log.Warn("scheduler: this leader's election key is gone; stepping down", "replica", s.cfg.Replica,
				"electionRevision", created)
			cancel()
			return
		default:
			from = resp.Header.Revision + 1
		}
	}
}

// processGone holds a gRPC health stream to address and reports true once
// the process there, having answered, has its stream end and address
// refuses connections: the process that served there is gone, and nothing
// took its place. A stream that ends while the address still accepts (a
// network blip, the process restarted) is opened again. It reports false
// when ctx ends.
func (s *Server) processGone(ctx context.Context, address string) bool {
	creds := s.cfg.PeerTransport
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient("passthrough:///"+address, grpc.WithTransportCredentials(creds))
	if err != nil {
		return false
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	defer s.metrics.following.Set(0)
	answered := false // by this address, since this follow began
	for ctx.Err() == nil {
		stream, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
		for err == nil {
			if _, err = stream.Recv(); err == nil {
				answered = true
				s.metrics.following.Set(1)
			}
		}
		s.metrics.following.Set(0)
		if ctx.Err() != nil {
			return false
		}
		if answered && refused(ctx, address) {
			return true
		}
		// Look again soon after a stream that answered; a leader that
		// never did (unreachable, or another TLS) is tried less often.
		again := 200 * time.Millisecond
		if !answered {
			again = 2 * time.Second
		}
		if !sleepCtx(ctx, again) {
			return false
		}
	}
	return false
}

// refused: TCP connections to address are refused (nothing listens
// there) within a moment; a timeout or any other error is not proof of
// that. A process being killed closes its connections before its
// listener, so a first connection may still be accepted (and reset).
func refused(ctx context.Context, address string) bool {
	for range 5 {
		dctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		c, err := (&net.Dialer{}).DialContext(dctx, "tcp", address)
		cancel()
		if err == nil {
			_ = c.Close()
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			return true
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return false
		}
	}
	return false
}

// dialable: address names a host another replica can reach (not an
// unspecified address such as ":7073" or "0.0.0.0:7073", which would
// reach the caller's own host).
func dialable(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil || host == "" {
		return false
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		return false
	}
	return true
}

// sleepCtx sleeps d, or less when ctx ends first (then false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
