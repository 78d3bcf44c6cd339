package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/services/nodemanager"
)

// Report retry: the first retry after reportBackoff, doubling to
// reportMaxBackoff, for as long as it takes.
const (
	reportBackoff    = 100 * time.Millisecond
	reportMaxBackoff = 5 * time.Second
)

// reporter stores the pods' run reports: the latest one of each pod, in
// batches (one Txn for every report pending at once), retried with backoff
// until stored. A report never waits behind a failing etcd: send returns
// at once.
type reporter struct {
	client *clientv3.Client
	log    *slog.Logger

	mu      sync.Mutex
	pending map[string]pendingReport // by run key
	wake    chan struct{}
}

type pendingReport struct {
	req *nodemanagerv1.ReportWorkloadStateRequest
	// stored is called once the report (or a later one of the pod) is
	// stored; nil for none.
	stored func()
}

func newReporter(client *clientv3.Client, log *slog.Logger) *reporter {
	return &reporter{client: client, log: log, pending: map[string]pendingReport{}, wake: make(chan struct{}, 1)}
}

// send queues r, replacing an older pending report of the same pod.
func (rp *reporter) send(key string, r *nodemanagerv1.ReportWorkloadStateRequest, stored func()) {
	rp.mu.Lock()
	rp.queue(key, pendingReport{req: r, stored: stored})
	rp.mu.Unlock()
	select {
	case rp.wake <- struct{}{}:
	default:
	}
}

// queue makes p the pod's pending report unless a later one is pending;
// either way the one kept calls both stored funcs (a report older than
// the pending one is stored by that one). Called with mu held.
func (rp *reporter) queue(key string, p pendingReport) {
	old, ok := rp.pending[key]
	if ok && old.req.GetObserveTime().AsTime().After(p.req.GetObserveTime().AsTime()) {
		p.req = old.req
	}
	p.stored = chain(old.stored, p.stored)
	rp.pending[key] = p
}

func chain(a, b func()) func() {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func() { a(); b() }
}

// run stores reports until ctx is done, then tries once more for up to
// reportTimeout (the STOPPED reports of shutdown).
func (rp *reporter) run(ctx context.Context) {
	backoff := reportBackoff
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
			rp.flush(fctx)
			cancel()
			return
		case <-rp.wake:
		case <-retry:
		}
		if rp.flush(ctx) {
			backoff, retry = reportBackoff, nil
			continue
		}
		retry = time.After(backoff)
		backoff = min(2*backoff, reportMaxBackoff)
	}
}

// flush stores every pending report; false when some could not be stored
// (they stay pending unless a later one of the pod arrived meanwhile).
func (rp *reporter) flush(ctx context.Context) bool {
	rp.mu.Lock()
	batch := rp.pending
	rp.pending = map[string]pendingReport{}
	rp.mu.Unlock()
	if len(batch) == 0 {
		return true
	}
	reqs := make(map[string]*nodemanagerv1.ReportWorkloadStateRequest, len(batch))
	for k, p := range batch {
		reqs[k] = p.req
	}
	failed, err := nodemanager.PutRuns(ctx, rp.client, reqs)
	if err != nil {
		rp.log.Warn("run reports not stored; retrying", "reports", len(failed), "err", err)
	}
	rp.mu.Lock()
	for k, p := range batch {
		if failed[k] {
			rp.queue(k, p)
			continue
		}
		if p.stored != nil {
			defer p.stored()
		}
	}
	rp.mu.Unlock()
	return len(failed) == 0
}
