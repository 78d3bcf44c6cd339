package workload

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// The status controller's model: the keys of the prefixes it folds, as of
// one revision, kept by one watch over the key range from the first of
// them to the last (bindings/ … workloads/ sort in that order; keys of
// other prefixes in between are ignored). One watch delivers every change
// in revision order, each revision whole, so after each response the model
// is a consistent snapshot, as one transaction reading every prefix was.

// watchedPrefixes are the prefixes the model keeps; watchStart and
// watchEnd bound the one watch that covers them.
var (
	watchedPrefixes = []string{etcdstore.PrefixBindings, etcdstore.PrefixEvictions, etcdstore.PrefixNodes,
		etcdstore.PrefixReasons, etcdstore.PrefixRuns, etcdstore.PrefixWorkloads}
	watchStart = etcdstore.PrefixBindings
	watchEnd   = clientv3.GetPrefixRangeEnd(etcdstore.PrefixWorkloads)
)

type mvccKV struct {
	key    string
	value  []byte
	modRev int64
}

// model is what a reconcile reads.
type model struct {
	rev       int64
	workloads map[string]*mvccKV            // by project/workload
	bindings  map[string]map[string]*mvccKV // by workload, then key
	runs      map[string]map[string]*mvccKV // by workload, then binding id {node}/{project}.{workload}.{pod}
	evictions map[string]map[string]*mvccKV // by workload, then key
	reasons   map[string]*mvccKV            // by project/workload
	pools     map[string]string             // node pool (`nodepools/{pool}`) by node name `nodes/{node}`
	// timed are the workloads the time sweep visits: RUNNING, not
	// suspended, with limits; or finished with a time to live.
	timed map[string]bool
}

func newModel() *model {
	return &model{workloads: map[string]*mvccKV{}, bindings: map[string]map[string]*mvccKV{},
		runs: map[string]map[string]*mvccKV{}, evictions: map[string]map[string]*mvccKV{},
		reasons: map[string]*mvccKV{}, pools: map[string]string{}, timed: map[string]bool{}}
}

// load reads the watched prefixes in one transaction.
func (c *Controller) load(ctx context.Context) (*model, error) {
	ops := make([]clientv3.Op, len(watchedPrefixes))
	for i, p := range watchedPrefixes {
		ops[i] = clientv3.OpGet(p, clientv3.WithPrefix())
	}
	resp, err := c.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("read workload status sources: %w: %w", etcdstore.ErrUnavailable, err)
	}
	m := newModel()
	m.rev = resp.Header.Revision
	for i := range watchedPrefixes {
		for _, kv := range resp.Responses[i].GetResponseRange().GetKvs() {
			c.put(m, kv)
		}
	}
	return m, nil
}

// timed says whether time alone can change w: a limit on a running
// workload, or the time to live of a finished one.
func timed(w *workloadv1.Workload) bool {
	phase := w.GetStatus().GetPhase()
	return (w.GetLimits() != nil && !w.GetSpec().GetSuspended() && phase == workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING) ||
		(w.GetSpec().GetTtlAfterFinishedSeconds() > 0 && IsFinal(phase))
}

// put records a key's new value and returns the workload it concerns ("" for none).
func (c *Controller) put(m *model, kv *mvccpb.KeyValue) string {
	e := &mvccKV{key: string(kv.Key), value: kv.Value, modRev: kv.ModRevision}
	return c.record(m, e.key, e)
}

// record sets (e != nil) or deletes key in the model and returns the
// workload it concerns.
func (c *Controller) record(m *model, key string, e *mvccKV) string {
	switch {
	case strings.HasPrefix(key, etcdstore.PrefixWorkloads):
		id := strings.TrimPrefix(key, etcdstore.PrefixWorkloads)
		setOrDelete1(m.workloads, id, e)
		delete(m.timed, id)
		if e != nil {
			w := new(workloadv1.Workload)
			if err := proto.Unmarshal(e.value, w); err == nil && timed(w) {
				m.timed[id] = true
			}
		}
		return id
	case strings.HasPrefix(key, etcdstore.PrefixBindings):
		id := podWorkload(strings.TrimPrefix(key, etcdstore.PrefixBindings))
		setOrDelete2(m.bindings, id, key, e)
		return id
	case strings.HasPrefix(key, etcdstore.PrefixRuns):
		bid := strings.TrimPrefix(key, etcdstore.PrefixRuns)
		id := podWorkload(bid)
		setOrDelete2(m.runs, id, bid, e)
		return id
	case strings.HasPrefix(key, etcdstore.PrefixEvictions):
		id := evictionWorkload(strings.TrimPrefix(key, etcdstore.PrefixEvictions))
		setOrDelete2(m.evictions, id, key, e)
		return id
	case strings.HasPrefix(key, etcdstore.PrefixReasons):
		id := reasonsWorkload(strings.TrimPrefix(key, etcdstore.PrefixReasons))
		if id != "" {
			setOrDelete1(m.reasons, id, e)
		}
		return id
	case strings.HasPrefix(key, etcdstore.PrefixNodes):
		name := "nodes/" + strings.TrimPrefix(key, etcdstore.PrefixNodes)
		if e == nil {
			delete(m.pools, name) // a deleted node's workloads keep the pool last set
			return ""
		}
		n := new(nodemanagerv1.Node)
		if err := proto.Unmarshal(e.value, n); err != nil {
			c.skipped.Report(e.key, e.modRev, fmt.Errorf("decode %s: %w", e.key, err))
			return ""
		}
		m.pools[name] = clusterproto.NodePoolName(n.GetNodePool())
	}
	return ""
}

func setOrDelete1(m map[string]*mvccKV, id string, e *mvccKV) {
	if e == nil {
		delete(m, id)
	} else {
		m[id] = e
	}
}

func setOrDelete2(m map[string]map[string]*mvccKV, id, key string, e *mvccKV) {
	if id == "" {
		return // a malformed key names no workload
	}
	if e == nil {
		delete(m[id], key)
		if len(m[id]) == 0 {
			delete(m, id)
		}
		return
	}
	if m[id] == nil {
		m[id] = map[string]*mvccKV{}
	}
	m[id][key] = e
}

func sortedKVs(m map[string]*mvccKV) []*mvccKV {
	out := make([]*mvccKV, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// bindingsOf is a workload's bindings in key order.
func (m *model) bindingsOf(id string) []*mvccKV { return sortedKVs(m.bindings[id]) }

// evictionsOf is a workload's eviction events in key order (time, then
// sequence), at most maxConsumed: the rest are folded by the next
// reconcile, which their own deletes start.
func (m *model) evictionsOf(id string) []*mvccKV {
	evs := sortedKVs(m.evictions[id])
	return evs[:min(len(evs), maxConsumed)]
}

// maxConsumed bounds the keys one reconcile deletes besides the workload
// write, well inside etcd's default of 128 operations per transaction.
const maxConsumed = 60

// runOf is the run report of a binding that counts: newer than the
// binding (a report of an earlier placement of the same pod does not).
func (m *model) runOf(id string, b *mvccKV) *mvccKV {
	r := m.runs[id][strings.TrimPrefix(b.key, etcdstore.PrefixBindings)]
	if r == nil || r.modRev <= b.modRev {
		return nil
	}
	return r
}

// staleRuns are a workload's run reports that no longer count (their
// binding is gone, or was written after them), at most maxConsumed.
func (m *model) staleRuns(id string) []*mvccKV {
	var out []*mvccKV
	for _, r := range sortedKVs(m.runs[id]) {
		b := m.bindings[id][etcdstore.PrefixBindings+strings.TrimPrefix(r.key, etcdstore.PrefixRuns)]
		if b == nil || r.modRev <= b.modRev {
			out = append(out, r)
		}
		if len(out) == maxConsumed {
			break
		}
	}
	return out
}

// ids is every workload the model knows of: stored, or with evictions or
// run reports left to collect.
func (m *model) ids() []string {
	seen := map[string]bool{}
	for id := range m.workloads {
		seen[id] = true
	}
	for id := range m.evictions {
		seen[id] = true
	}
	for id := range m.runs {
		seen[id] = true
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// controllerRetry is the pause before a failed reconcile is retried.
const controllerRetry = 200 * time.Millisecond

// Run loads the model, reconciles every workload, then follows the watch,
// reconciling the workloads each change concerns. A compacted or failed
// watch loads again. It returns nil when ctx ends, or an error when the
// etcd client was closed.
func (c *Controller) Run(ctx context.Context) error {
	for {
		err := c.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if c.client.Ctx().Err() != nil { // closed client: retrying cannot help
			return err
		}
		c.log.Warn("workload controller: reloading", "err", err)
		if !sleep(ctx, controllerRetry) {
			return nil
		}
	}
}

// runOnce is one load and watch; it returns when the watch fails.
func (c *Controller) runOnce(ctx context.Context) error {
	m, err := c.load(ctx)
	if err != nil {
		return err
	}
	dirty := map[string]bool{}
	for _, id := range m.ids() {
		dirty[id] = true
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	events := c.client.Watch(wctx, watchStart, clientv3.WithRange(watchEnd), clientv3.WithRev(m.rev+1))
	tick := time.NewTicker(c.every)
	defer tick.Stop()
	var retry <-chan time.Time
	for {
		if len(dirty) > 0 && retry == nil {
			if err := c.reconcileDirty(ctx, m, dirty); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				c.log.Warn("workload controller: reconcile failed; retrying", "err", err)
				retry = time.After(controllerRetry)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			for id := range m.timed {
				dirty[id] = true
			}
		case <-retry:
			retry = nil
		case resp, ok := <-events:
			for ok {
				if err := c.apply(m, resp, dirty); err != nil {
					return err
				}
				select { // take whatever else is ready: a burst is one pass
				case resp, ok = <-events:
					continue
				default:
				}
				break
			}
			if !ok {
				return fmt.Errorf("watch %s..%s: closed: %w", watchStart, watchEnd, etcdstore.ErrUnavailable)
			}
		}
	}
}

// apply records one watch response in the model and marks the workloads it
// concerns.
func (c *Controller) apply(m *model, resp clientv3.WatchResponse, dirty map[string]bool) error {
	if resp.CompactRevision != 0 {
		return fmt.Errorf("watch from revision %d: compacted up to %d: %w", m.rev+1, resp.CompactRevision, etcdstore.ErrCompacted)
	}
	if err := resp.Err(); err != nil {
		return fmt.Errorf("watch from revision %d: %w", m.rev+1, err)
	}
	for _, ev := range resp.Events {
		key := string(ev.Kv.Key)
		if !watched(key) {
			continue
		}
		var id string
		if ev.Type == clientv3.EventTypeDelete {
			id = c.record(m, key, nil)
		} else {
			id = c.put(m, ev.Kv)
		}
		if id != "" {
			dirty[id] = true
		}
		m.rev = max(m.rev, ev.Kv.ModRevision)
	}
	return nil
}

func watched(key string) bool {
	for _, p := range watchedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// reconcileDirty reconciles the marked workloads; those whose write
// conflicted stay marked (the watch brings the newer value, which marks
// them again), as do all when another error stops the pass.
func (c *Controller) reconcileDirty(ctx context.Context, m *model, dirty map[string]bool) error {
	ids := make([]string, 0, len(dirty))
	for id := range dirty {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		err := c.reconcileOne(ctx, m, id)
		switch {
		case err == nil:
			delete(dirty, id)
		case errors.Is(err, etcdstore.ErrConflict):
			delete(dirty, id) // the watch marks it again with the value that won
		default:
			return err
		}
	}
	return nil
}
