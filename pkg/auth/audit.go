package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"google.golang.org/protobuf/types/known/timestamppb"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// recorder writes audit events to etcd in batches (one transaction each),
// under time-ordered keys (AuditEventID), so retention deletes one key range
// and listing newest first is a reverse range read. A change's event is
// committed before the change is made (commit: the caller waits for its
// batch, which it shares with every other call of the moment), and its
// outcome follows in the background (record) under the same key; a process
// killed in between leaves the event with outcome_unknown. So every change
// that was acknowledged has its event.
type recorder struct {
	client    *clientv3.Client
	log       *slog.Logger
	now       func() time.Time
	retention time.Duration
	// refused aggregates the refused calls (refused.go), written every
	// window; at most maxRefused of their events are kept.
	refused    *refusals
	window     time.Duration
	maxRefused int
	queue      chan queued
	stopped    chan struct{} // closed when run has returned

	mu   sync.Mutex
	last int64 // the last event id's time

	written, dropped, capped prometheus.Counter
}

// queued is an event waiting for its batch; done (when not nil) gets the
// outcome of its write; refused marks an aggregate of refused calls (indexed
// for the size cap).
type queued struct {
	ev      *identityv1.AuditEvent
	done    chan error
	refused bool
}

// A batch holds at most auditBatch events and auditBatchBytes of them, far
// under etcd's largest request, and an event at most maxAuditField bytes per
// field: no event, and no batch, can be too large for etcd.
const (
	auditBatch      = 64
	auditBatchBytes = 256 << 10
	maxAuditField   = 512
)

func newRecorder(c *clientv3.Client, log *slog.Logger, now func() time.Time, cfg Config) *recorder {
	return &recorder{client: c, log: log, now: now, retention: cfg.AuditRetention,
		refused: newRefusals(cfg.RefusedRate, float64(cfg.RefusedBurst), now), window: cfg.RefusedWindow, maxRefused: cfg.AuditMaxRefused,
		queue: make(chan queued, 4096), stopped: make(chan struct{}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "runway_audit_events_written_total",
			Help: "Audit events written to etcd."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "runway_audit_events_dropped_total",
			Help: "Audit events lost: not encodable, or etcd refused them (a change whose event is lost is refused)."}),
		capped: prometheus.NewCounter(prometheus.CounterOpts{Name: "runway_audit_refused_events_capped_total",
			Help: "Audit events of refused calls deleted, oldest first, to keep them within the size cap."})}
}

// eventID is a time-ordered event id: the time in hex nanoseconds (fixed
// width, so key order is time order), made strictly increasing within the
// process so that events of one process keep their order, and a random
// suffix against other processes.
func (r *recorder) eventID(t time.Time) string {
	n := t.UnixNano()
	r.mu.Lock()
	if n <= r.last {
		n = r.last + 1
	}
	r.last = n
	r.mu.Unlock()
	return auditID(n)
}

// auditID is an event id that sorts by time: the nanoseconds, then random
// bytes that keep ids of one nanosecond apart.
func auditID(unixNano int64) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%016x-%s", unixNano, hex.EncodeToString(b[:]))
}

// SystemAuditEvent is the audit record of a change the platform made on
// its own (no caller, no request), with the etcd key it is stored under,
// for a service to write in the same transaction as the change.
func SystemAuditEvent(now time.Time, principal, method, resource string) (string, *identityv1.AuditEvent) {
	id := auditID(now.UnixNano())
	return etcdstore.PrefixAudit + id, &identityv1.AuditEvent{Name: "auditEvents/" + id, CreateTime: timestamppb.New(now),
		Principal: principal, Method: method, Resource: resource}
}

// bounded cuts an event's caller-chosen fields (the resource a failed
// sign-in names, the peer) to maxAuditField bytes.
func bounded(ev *identityv1.AuditEvent) *identityv1.AuditEvent {
	for _, f := range []*string{&ev.Principal, &ev.Method, &ev.Resource, &ev.ErrorReason, &ev.PeerAddress, &ev.RequestId} {
		if len(*f) > maxAuditField {
			cut := maxAuditField
			for cut > 0 && !utf8.RuneStart((*f)[cut]) {
				cut--
			}
			*f = (*f)[:cut] + "…"
		}
	}
	return ev
}

// record queues ev to be written in the background; it blocks only while
// the queue is full (etcd is slower than the calls).
func (r *recorder) record(ev *identityv1.AuditEvent) {
	select {
	case <-r.stopped:
		r.log.Error("audit: event after shutdown not written", "method", ev.GetMethod(), "resource", ev.GetResource())
		return
	default:
	}
	select {
	case r.queue <- queued{ev: bounded(ev)}:
	case <-r.stopped:
		r.log.Error("audit: event after shutdown not written", "method", ev.GetMethod(), "resource", ev.GetResource())
	}
}

// errAuditStopped: the recorder is not running, so no change may be made.
var errAuditStopped = errors.New("audit: the recorder has stopped")

// commit writes ev and returns once it is in etcd (or failed to be).
func (r *recorder) commit(ctx context.Context, ev *identityv1.AuditEvent) error {
	select {
	case <-r.stopped:
		return errAuditStopped
	default:
	}
	done := make(chan error, 1)
	select {
	case r.queue <- queued{ev: bounded(ev), done: done}:
	case <-r.stopped:
		return errAuditStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-r.stopped:
		// Drained at shutdown (done is set before stopped closes), or
		// queued after the drain and never to be written.
		select {
		case err := <-done:
			return err
		default:
			return errAuditStopped
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *recorder) run(ctx context.Context) {
	defer close(r.stopped)
	sweep := time.NewTicker(time.Hour)
	defer sweep.Stop()
	flush := time.NewTicker(r.window)
	defer flush.Stop()
	r.expire(ctx)
	for {
		select {
		case <-ctx.Done():
			r.drain()
			return
		case q := <-r.queue:
			r.write(ctx, r.batch(q))
		case <-flush.C:
			r.flush(ctx)
		case <-sweep.C:
			r.expire(ctx)
		}
	}
}

// flush writes the window's aggregates of refused calls, then drops the
// oldest beyond the cap.
func (r *recorder) flush(ctx context.Context) {
	evs := r.refused.take()
	if len(evs) == 0 {
		return
	}
	for len(evs) > 0 {
		n := min(len(evs), auditBatch/2) // an aggregate is two keys
		qs := make([]queued, n)
		for i, ev := range evs[:n] {
			qs[i] = queued{ev: bounded(ev), refused: true}
		}
		r.write(ctx, qs)
		evs = evs[n:]
	}
	r.capRefused(ctx)
}

// capRefused deletes the oldest aggregates of refused calls beyond
// maxRefused, with their index keys, a few dozen per transaction.
func (r *recorder) capRefused(ctx context.Context) {
	resp, err := r.client.Get(ctx, etcdstore.PrefixAuditRefused, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		r.log.Warn("audit: refused-call events not counted", "err", err)
		return
	}
	over := resp.Count - int64(r.maxRefused)
	for over > 0 && ctx.Err() == nil {
		old, err := r.client.Get(ctx, etcdstore.PrefixAuditRefused, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
			clientv3.WithLimit(min(over, auditBatch/2)))
		if err != nil || len(old.Kvs) == 0 {
			if err != nil {
				r.log.Warn("audit: refused-call events over the cap not read", "err", err)
			}
			return
		}
		ops := make([]clientv3.Op, 0, 2*len(old.Kvs))
		for _, kv := range old.Kvs {
			id := strings.TrimPrefix(string(kv.Key), etcdstore.PrefixAuditRefused)
			ops = append(ops, clientv3.OpDelete(string(kv.Key)), clientv3.OpDelete(etcdstore.PrefixAudit+id))
		}
		if _, err := r.client.Txn(ctx).Then(ops...).Commit(); err != nil {
			r.log.Warn("audit: refused-call events over the cap not deleted", "err", err)
			return
		}
		r.capped.Add(float64(len(old.Kvs)))
		over -= int64(len(old.Kvs))
	}
}

// batch is q and whatever else is queued, within the batch limits.
func (r *recorder) batch(q queued) []queued {
	qs := []queued{q}
	size := proto.Size(q.ev)
	for len(qs) < auditBatch && size < auditBatchBytes {
		select {
		case q := <-r.queue:
			qs = append(qs, q)
			size += proto.Size(q.ev)
		default:
			return qs
		}
	}
	return qs
}

// drain writes what is still queued at shutdown (and the aggregates of
// the window), briefly.
func (r *recorder) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r.flush(ctx)
	for {
		select {
		case q := <-r.queue:
			r.write(ctx, r.batch(q))
		default:
			return
		}
	}
}

// write commits a batch; when the batch fails, each event is tried alone,
// so one bad event costs only itself.
func (r *recorder) write(ctx context.Context, qs []queued) {
	err := r.txn(ctx, qs)
	if err != nil && len(qs) > 1 && ctx.Err() == nil {
		r.log.Warn("audit: batch write failed; writing its events one by one", "events", len(qs), "err", err)
		for _, q := range qs {
			r.write(ctx, []queued{q})
		}
		return
	}
	if err == nil {
		r.written.Add(float64(len(qs)))
	}
	for _, q := range qs {
		if err != nil {
			r.dropped.Inc()
		}
		if q.done != nil {
			q.done <- err
		} else if err != nil {
			r.log.Error("audit: event lost", "method", q.ev.GetMethod(), "resource", q.ev.GetResource(), "err", err)
		}
	}
}

// txn puts the events in one transaction, retrying a failing store a few
// times; the later of two writes of one event (its outcome) wins.
func (r *recorder) txn(ctx context.Context, qs []queued) error {
	byKey := map[string]string{}
	var keys []string
	for _, q := range qs {
		b, err := proto.Marshal(q.ev)
		if err != nil {
			return fmt.Errorf("audit: encode: %w", err)
		}
		id := strings.TrimPrefix(q.ev.GetName(), "auditEvents/")
		k := etcdstore.PrefixAudit + id
		if _, seen := byKey[k]; !seen {
			keys = append(keys, k)
		}
		byKey[k] = string(b)
		if q.refused {
			keys = append(keys, etcdstore.PrefixAuditRefused+id)
			byKey[etcdstore.PrefixAuditRefused+id] = ""
		}
	}
	ops := make([]clientv3.Op, 0, len(keys))
	for _, k := range keys {
		ops = append(ops, clientv3.OpPut(k, byKey[k]))
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if _, err = r.client.Txn(ctx).Then(ops...).Commit(); err == nil || ctx.Err() != nil {
			return err
		}
		if len(qs) > 1 {
			return err // the caller splits the batch
		}
		r.log.Warn("audit: write failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
	return err
}

// expire deletes the events older than the retention: one range delete.
func (r *recorder) expire(ctx context.Context) {
	cutoff := fmt.Sprintf("%016x", r.now().Add(-r.retention).UnixNano())
	for _, p := range []string{etcdstore.PrefixAudit, etcdstore.PrefixAuditRefused} {
		if _, err := r.client.Delete(ctx, p, clientv3.WithRange(p+cutoff)); err != nil && ctx.Err() == nil {
			r.log.Warn("audit: retention sweep failed", "err", err)
		}
	}
}

// Collectors are the audit log's counters, for the process's registry.
func (g *Guard) Collectors() []prometheus.Collector {
	return []prometheus.Collector{g.audit.written, g.audit.dropped, g.audit.capped}
}
