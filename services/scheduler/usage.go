package scheduler

import (
	"context"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/fairshare"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// Time-based fair share (shared/SCHEDULING.md §2) keeps one decayed usage
// number per queue, node pool and resource in the model
// (cluster.Queue.Decayed). The leader accrues it before every cycle from
// what the model holds, which is what the plans it applied bound, and
// writes it every Config.UsageInterval under etcdstore.PrefixUsage: one
// QueueUsage per queue with usage, rewritten in place (never a series),
// in the same fenced transactions as a plan. A new leader, or the same one
// after its cache was rebuilt from a new list, reads the records back and
// accrues each from its accrue_time with what the queue holds now: the
// work bound across the gap kept running.

// usageBook is the leader's bookkeeping of that usage. Only the leader's
// loop goroutine uses it.
type usageBook struct {
	state     *cluster.State // the model last accrued; another one is restored from written
	at        time.Time      // when state was last accrued
	written   map[string]*schedulerv1.QueueUsage
	lastWrite time.Time // zero: write at the next cycle
}

// loadUsage reads the records a new leader starts from, by queue name.
func loadUsage(ctx context.Context, client *clientv3.Client) (*usageBook, error) {
	coll := etcdstore.NewCollection(client, etcdstore.PrefixUsage, func() *schedulerv1.QueueUsage { return new(schedulerv1.QueueUsage) })
	items, _, err := coll.ListAll(ctx, "")
	if err != nil {
		return nil, err
	}
	b := &usageBook{written: make(map[string]*schedulerv1.QueueUsage, len(items))}
	for _, it := range items {
		b.written[it.Msg.GetQueue()] = it.Msg
	}
	return b, nil
}

// accrue brings the model's usage to now. Called with the cache locked,
// before the cycle.
func (b *usageBook) accrue(st *cluster.State, now time.Time) {
	switch {
	case b.state != st:
		b.restore(st, now)
	case now.After(b.at):
		scheduling.AccrueUsage(st, now.Sub(b.at))
	}
	b.state, b.at = st, now
}

// restore sets each queue's usage from its record, accrued to now with what
// the queue holds, in the pools that have time-based fair share; a queue
// without a record there has none.
func (b *usageBook) restore(st *cluster.State, now time.Time) {
	for _, q := range allQueues(st) {
		for i := range q.Decayed {
			q.Decayed[i] = cluster.Decayed{}
		}
		rec, ok := b.written[queueName(q)]
		if !ok {
			continue
		}
		dt := now.Sub(rec.GetAccrueTime().AsTime())
		for _, np := range rec.GetNodePools() {
			p := st.Pool(clusterproto.ID(np.GetNodePool()))
			if p == nil || !p.TimeBased.On() {
				continue
			}
			held, u := q.Usage[p.Index].Allocated, np.GetUsage()
			for r, v := range [cluster.NumResources]float64{u.GetGpu(), u.GetCpu(), u.GetMemory()} {
				res := cluster.Resource(r)
				q.Decayed[p.Index][r] = fairshare.Accrue(v, float64(held.Get(res)), dt, p.TimeBased.HalfLife)
			}
		}
	}
}

// followerUsage gives a replica that does not lead the usage the leader
// last wrote (read at most once per UsageInterval), so that its GetQueue
// and ListQueues show the leader's u, s and w' rather than none. A read
// that fails keeps the last one. Called without the cache's lock.
func (s *Server) followerUsage(ctx context.Context) {
	now := s.cfg.Clock()
	s.mu.Lock()
	if s.leader != nil {
		s.mu.Unlock()
		return
	}
	due := s.followerRead.IsZero() || now.Sub(s.followerRead) >= s.cfg.UsageInterval
	s.mu.Unlock()
	if due {
		if b, err := loadUsage(ctx, s.client); err == nil {
			s.mu.Lock()
			s.follower, s.followerRead = b, now
			s.mu.Unlock()
		}
	}
	c := s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	// Checked again under the cache's lock: a replica that started leading
	// meanwhile accrues its own usage, which a stale record must not replace.
	if s.leader == nil && s.follower != nil && c.ready {
		s.follower.restore(c.state, now)
	}
}

// writes returns, once every interval, the puts that bring the records to
// the model's usage and the deletes of records no queue needs (no usage
// left, the pool's setting off, the queue gone), with the records they
// leave; nil, nil between two intervals. Called with the cache locked,
// after accrue.
func (b *usageBook) writes(st *cluster.State, now time.Time, interval time.Duration) ([]write, map[string]*schedulerv1.QueueUsage) {
	if !b.lastWrite.IsZero() && now.Sub(b.lastWrite) < interval {
		return nil, nil
	}
	pools := append([]*cluster.Pool(nil), st.Pools...)
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	next := map[string]*schedulerv1.QueueUsage{}
	var out []write
	for _, q := range allQueues(st) {
		rec := &schedulerv1.QueueUsage{Queue: queueName(q), AccrueTime: timestamppb.New(now)}
		for _, p := range pools {
			d := q.Decayed[p.Index]
			if p.TimeBased.On() && d != (cluster.Decayed{}) {
				rec.NodePools = append(rec.NodePools, &schedulerv1.NodePoolUsage{NodePool: "nodepools/" + p.Name,
					Usage: &schedulerv1.ResourceValues{Gpu: d[cluster.GPU], Cpu: d[cluster.CPU], Memory: d[cluster.Memory]}})
			}
		}
		if len(rec.NodePools) > 0 {
			next[rec.Queue] = rec
			out = append(out, write{key: usageKey(rec.Queue), msg: rec})
		}
	}
	var gone []string
	for name := range b.written {
		if _, ok := next[name]; !ok {
			gone = append(gone, name)
		}
	}
	sort.Strings(gone)
	for _, name := range gone {
		out = append(out, write{key: usageKey(name)})
	}
	return out, next
}

// committed records that the records of writes are in etcd.
func (b *usageBook) committed(next map[string]*schedulerv1.QueueUsage, now time.Time) {
	if next != nil {
		b.written, b.lastWrite = next, now
	}
}

// usageKey is a queue's record key: PrefixUsage + "projects/team-a".
func usageKey(queue string) string {
	return etcdstore.PrefixUsage + strings.TrimSuffix(queue, "/queue")
}

// allQueues lists departments, each followed by its projects.
func allQueues(st *cluster.State) []*cluster.Queue {
	var out []*cluster.Queue
	for _, d := range st.Departments {
		out = append(out, d)
		out = append(out, d.Children...)
	}
	return out
}

// timeBasedProto explains q's weights in pool p, or nil where the pool has
// no time-based fair share. Usage is shown in GPU-, core- and byte-seconds.
func timeBasedProto(q *cluster.Queue, p *cluster.Pool) *schedulerv1.QueueTimeBasedFairShare {
	if !p.TimeBased.On() {
		return nil
	}
	d, a := q.Decayed[p.Index], q.Adjusted[p.Index]
	values := func(f func(fairshare.Adjustment) float64) *schedulerv1.ResourceValues {
		return &schedulerv1.ResourceValues{Gpu: f(a[cluster.GPU]), Cpu: f(a[cluster.CPU]), Memory: f(a[cluster.Memory])}
	}
	return &schedulerv1.QueueTimeBasedFairShare{
		Usage:          &schedulerv1.ResourceValues{Gpu: d[cluster.GPU] / 1000, Cpu: d[cluster.CPU] / 1000, Memory: d[cluster.Memory]},
		UsageShare:     values(func(x fairshare.Adjustment) float64 { return x.UsageShare }),
		WeightShare:    values(func(x fairshare.Adjustment) float64 { return x.WeightShare }),
		AdjustedWeight: values(func(x fairshare.Adjustment) float64 { return x.Weight }),
	}
}
