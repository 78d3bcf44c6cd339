package scheduler

import (
	"context"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// fence is the leader's election key and its CreateRevision: every write of
// a plan is conditional on it, so a deposed leader (whose key is gone, or
// was re-created by a new campaign) cannot commit.
type fence struct {
	Key string
	Rev int64
}

// write is one etcd operation of a plan: a put (msg set) or a delete,
// conditional on the key's ModRevision being modRev (0: absent) when
// checked is set.
type write struct {
	key     string
	msg     proto.Message
	modRev  int64
	checked bool
}

// writes is a plan turned into etcd operations: evictions first (binding
// deletes and eviction events), then bindings, then the pending reasons
// records that changed (reasons.go).
type writes struct {
	evict   []write
	bind    []write
	reasons []write
}

func (w writes) empty() bool { return len(w.evict) == 0 && len(w.bind) == 0 && len(w.reasons) == 0 }

// planWrites turns a plan into writes, reading the cache for the keys of
// the bindings it deletes. Called with the cache locked, on the state the
// plan was computed from (Cycle leaves it as it was).
//
//   - A binding is a put of {node}/{project}.{workload}.{pod} if absent; a
//     pod still bound elsewhere (its node was lost) has that key deleted.
//   - An eviction deletes the pods' binding keys (each if unchanged) and
//     puts one PREEMPTED event under PrefixEvictions.
//   - Orphans: bindings of workloads the model no longer holds (deleted,
//     finished, suspended) are deleted; those on lost nodes also get a
//     NODE_LOST event.
func (c *Cache) planWrites(plan scheduling.Plan, now time.Time) writes {
	var out writes
	seq := 0
	event := func(workloadID string, ev *workloadv1.WorkloadEvent) {
		seq++
		key := fmt.Sprintf("%s%s/%020d-%d", etcdstore.PrefixEvictions, workloadID, now.UnixNano(), seq)
		out.evict = append(out.evict, write{key: key, msg: ev})
	}
	deleted := map[string]bool{}
	del := func(bid string) {
		if b, ok := c.bindings[bid]; ok && !deleted[bid] {
			deleted[bid] = true
			out.evict = append(out.evict, write{key: etcdstore.PrefixBindings + bid, modRev: b.Revision, checked: true})
		}
	}
	for _, e := range plan.Evictions {
		w := c.state.Workload(e.Workload)
		if w == nil {
			continue
		}
		pods := e.Pods
		if pods == nil {
			for i, p := range w.Placed {
				if p.Node != nil {
					pods = append(pods, i)
				}
			}
		}
		for _, pod := range pods {
			del(c.byPod[podKey{e.Workload, pod}])
		}
		ev := &workloadv1.WorkloadEvent{
			Type: workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED, Time: timestamppb.New(now),
			Message: e.Reason, Rule: ruleOf(e.Rule), Pods: int32(len(pods)), Nodes: nodesOf(w, pods),
		}
		if e.For != "" {
			ev.By = workloadName(e.For)
		}
		event(e.Workload, ev)
	}
	c.orphanWrites(del, event, now)
	for _, b := range plan.Bindings {
		id := bindingID(b.Node, b.Workload, b.Pod)
		if old, ok := c.byPod[podKey{b.Workload, b.Pod}]; ok && old != id {
			del(old)
		}
		ps := &workloadv1.PodStatus{Index: int32(b.Pod), Node: "nodes/" + b.Node, FractionMilli: int32(b.Share),
			State: workloadv1.PodState_POD_STATE_BOUND}
		for _, d := range b.Devices {
			ps.DeviceIndexes = append(ps.DeviceIndexes, int32(d))
		}
		if deleted[id] {
			continue // its stale copy is deleted in this plan; bound again next cycle
		}
		out.bind = append(out.bind, write{key: etcdstore.PrefixBindings + id, msg: ps, checked: true})
	}
	return out
}

// orphanWrites deletes bindings the model cannot use: their workload is gone
// (or final, or suspended), or their node is lost (deleted past the grace
// period, NotReady: NODE_LOST) or drained with eviction (NODE_DRAINED); the
// pod is scheduled again elsewhere. A node missing within the grace period,
// or drained without eviction, keeps its bindings.
func (c *Cache) orphanWrites(del func(string), event func(string, *workloadv1.WorkloadEvent), now time.Time) {
	ids := make([]string, 0)
	for bid := range c.bindings {
		ids = append(ids, bid)
	}
	sort.Strings(ids)
	type lostKey struct {
		workload string
		rule     workloadv1.SchedulingRule
	}
	lost := map[lostKey]int{}
	var lostOrder []lostKey
	for _, bid := range ids {
		b := c.bindings[bid]
		if raw, ok := c.workloads[b.Workload]; !ok || !schedulable(raw) {
			del(bid)
			continue
		}
		rule := c.nodeGone(b.Node)
		if rule == workloadv1.SchedulingRule_SCHEDULING_RULE_UNSPECIFIED {
			continue
		}
		if c.state.Workload(b.Workload) == nil {
			continue // not in the model yet; wait
		}
		del(bid)
		k := lostKey{b.Workload, rule}
		if _, seen := lost[k]; !seen {
			lostOrder = append(lostOrder, k)
		}
		lost[k]++
	}
	for _, k := range lostOrder {
		msg := fmt.Sprintf("%d pods lost with their node.", lost[k])
		if k.rule == workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_DRAINED {
			msg = fmt.Sprintf("%d pods evicted: their node was drained.", lost[k])
		}
		event(k.workload, &workloadv1.WorkloadEvent{
			Type: workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED, Time: timestamppb.New(now),
			Message: msg, Rule: k.rule, Pods: int32(lost[k]),
		})
	}
}

// nodeGone says why a node's bindings must go (NODE_LOST, NODE_DRAINED), or
// UNSPECIFIED when they stay.
func (c *Cache) nodeGone(id string) workloadv1.SchedulingRule {
	n, ok := c.nodes[id]
	switch {
	case !ok:
		if _, inGrace := c.missing[id]; inGrace {
			return workloadv1.SchedulingRule_SCHEDULING_RULE_UNSPECIFIED
		}
		return workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_LOST
	case n.GetReadiness() != nodemanagerv1.Readiness_READINESS_READY:
		return workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_LOST
	case n.GetDrained() && n.GetDrainEvicts():
		return workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_DRAINED
	}
	return workloadv1.SchedulingRule_SCHEDULING_RULE_UNSPECIFIED
}

// apply commits a plan's writes fenced by f, in one transaction when it
// has at most maxOps-1 writes (each write may carry a condition, and the
// fence is one more). A bigger plan is cut into several transactions of
// maxOps-1 writes, evictions before bindings, each fenced and atomic on its
// own. A leader that loses its key between two of them leaves a prefix of
// the plan written, which is safe: evictions without their bindings leave
// room free, and the next leader plans from what is in etcd. It returns the
// revision of the last transaction.
func apply(ctx context.Context, client *clientv3.Client, f fence, w writes, maxOps int) (int64, error) {
	if maxOps <= 0 {
		maxOps = etcdstore.DefaultMaxOps
	}
	ops := append(append(append([]write(nil), w.evict...), w.bind...), w.reasons...)
	// Each write may carry a condition, and the fence is one more: a
	// transaction holds maxOps-1 writes so both stay within maxOps.
	chunk := max(1, maxOps-1)
	var rev int64
	for start := 0; start < len(ops); start += chunk {
		b := etcdstore.NewBatch(client)
		b.MaxOps = maxOps
		b.Fence(f.Key, f.Rev)
		for _, op := range ops[start:min(start+chunk, len(ops))] {
			switch {
			case op.msg != nil && op.checked:
				b.PutIf(op.key, op.msg, op.modRev)
			case op.msg != nil:
				b.Put(op.key, op.msg)
			case op.checked:
				b.DeleteIf(op.key, op.modRev)
			default:
				b.Delete(op.key)
			}
		}
		r, err := b.Commit(ctx)
		if err != nil {
			return rev, fmt.Errorf("apply plan (writes %d-%d of %d): %w", start+1, min(start+chunk, len(ops)), len(ops), err)
		}
		rev = r
	}
	return rev, nil
}

func ruleOf(r scheduling.Rule) workloadv1.SchedulingRule {
	switch r {
	case scheduling.RuleReclaim:
		return workloadv1.SchedulingRule_SCHEDULING_RULE_RECLAIM
	case scheduling.RulePreempt:
		return workloadv1.SchedulingRule_SCHEDULING_RULE_PREEMPT
	case scheduling.RuleGangMinimum:
		return workloadv1.SchedulingRule_SCHEDULING_RULE_GANG_MINIMUM
	}
	return workloadv1.SchedulingRule_SCHEDULING_RULE_UNSPECIFIED
}

// nodesOf lists `nodes/{node}` of the given pods of w, sorted, distinct.
func nodesOf(w *cluster.Workload, pods []int) []string {
	seen := map[string]bool{}
	var out []string
	for _, pod := range pods {
		if n := w.Placed[pod].Node; n != nil && !seen[n.Name] {
			seen[n.Name] = true
			out = append(out, "nodes/"+n.Name)
		}
	}
	sort.Strings(out)
	return out
}

// workloadName is the resource name of a cluster ID "project/workload".
func workloadName(id string) string {
	for i := range len(id) {
		if id[i] == '/' {
			return "projects/" + id[:i] + "/workloads/" + id[i+1:]
		}
	}
	return id
}
