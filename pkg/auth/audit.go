package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// recorder writes audit events to etcd in the background, in batches, so a
// mutating call waits for no extra etcd round trip. Keys are time-ordered
// (AuditEventID), so retention deletes one key range and listing newest
// first is a reverse range read.
type recorder struct {
	client    *clientv3.Client
	log       *slog.Logger
	now       func() time.Time
	retention time.Duration
	queue     chan *identityv1.AuditEvent

	mu   sync.Mutex
	last int64 // the last event id's time

	written, dropped prometheus.Counter
}

// auditBatch is the most events written in one etcd transaction.
const auditBatch = 64

func newRecorder(c *clientv3.Client, log *slog.Logger, now func() time.Time, retention time.Duration) *recorder {
	return &recorder{client: c, log: log, now: now, retention: retention, queue: make(chan *identityv1.AuditEvent, 4096),
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "runway_audit_events_written_total",
			Help: "Audit events written to etcd."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "runway_audit_events_dropped_total",
			Help: "Audit events lost: not encodable, or etcd refused them five times."})}
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
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%016x-%s", n, hex.EncodeToString(b[:]))
}

// record queues ev; it blocks only while the queue is full (etcd is slower
// than the calls), so no event is dropped.
func (r *recorder) record(ev *identityv1.AuditEvent) { r.queue <- ev }

func (r *recorder) run(ctx context.Context) {
	sweep := time.NewTicker(time.Hour)
	defer sweep.Stop()
	r.expire(ctx)
	for {
		select {
		case <-ctx.Done():
			r.drain()
			return
		case ev := <-r.queue:
			r.write(ctx, r.batch(ev))
		case <-sweep.C:
			r.expire(ctx)
		}
	}
}

// batch is ev and whatever else is queued, up to auditBatch.
func (r *recorder) batch(ev *identityv1.AuditEvent) []*identityv1.AuditEvent {
	evs := []*identityv1.AuditEvent{ev}
	for len(evs) < auditBatch {
		select {
		case ev := <-r.queue:
			evs = append(evs, ev)
		default:
			return evs
		}
	}
	return evs
}

// drain writes what is still queued at shutdown, briefly.
func (r *recorder) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		select {
		case ev := <-r.queue:
			r.write(ctx, r.batch(ev))
		default:
			return
		}
	}
}

func (r *recorder) write(ctx context.Context, evs []*identityv1.AuditEvent) {
	ops := make([]clientv3.Op, 0, len(evs))
	for _, ev := range evs {
		b, err := proto.Marshal(ev)
		if err != nil {
			r.dropped.Inc()
			continue
		}
		id := ev.GetName()[len("auditEvents/"):]
		ops = append(ops, clientv3.OpPut(etcdstore.PrefixAudit+id, string(b)))
	}
	for attempt := 0; attempt < 5; attempt++ {
		if _, err := r.client.Txn(ctx).Then(ops...).Commit(); err == nil {
			r.written.Add(float64(len(ops)))
			return
		} else if ctx.Err() != nil {
			break
		} else {
			r.log.Warn("audit: write failed; retrying", "events", len(evs), "err", err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	r.dropped.Add(float64(len(ops)))
	r.log.Error("audit: events lost", "events", len(ops))
}

// expire deletes the events older than the retention: one range delete.
func (r *recorder) expire(ctx context.Context) {
	cutoff := fmt.Sprintf("%016x", r.now().Add(-r.retention).UnixNano())
	if _, err := r.client.Delete(ctx, etcdstore.PrefixAudit, clientv3.WithRange(etcdstore.PrefixAudit+cutoff)); err != nil && ctx.Err() == nil {
		r.log.Warn("audit: retention sweep failed", "err", err)
	}
}

// Collectors are the audit log's counters, for the process's registry.
func (g *Guard) Collectors() []prometheus.Collector {
	return []prometheus.Collector{g.audit.written, g.audit.dropped}
}
