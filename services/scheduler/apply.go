package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
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

// group is the writes of one workload: its binding deletes and eviction
// events, its bindings and their pod keys. A group is the atomic unit of a
// plan write: it is never split between transactions, so a gang is bound
// (or evicted) whole or not at all.
type group struct {
	workload string // cluster ID
	ops      []write
}

// writes is a plan turned into etcd operations: one group per workload, in
// plan order (evicted workloads first, then orphans, then bindings), and
// the pending reasons records that changed (reasons.go), and, when due,
// the usage records of time-based fair share (usage.go).
type writes struct {
	groups  []group
	reasons []write
	usage   []write
}

func (w writes) empty() bool {
	return len(w.groups) == 0 && len(w.reasons) == 0 && len(w.usage) == 0
}

// takeUp records the workload whose writes planWrites builds next: a panic
// then is that workload's (planWritesContained).
func (c *Cache) takeUp(workload string) {
	c.writing = workload
	if c.onWrite != nil {
		c.onWrite(workload)
	}
}

// planBuilder collects a plan's writes by workload.
type planBuilder struct {
	out   writes
	index map[string]int // group of each workload
}

func (p *planBuilder) add(workloadID string, w write) {
	i := p.groupOf(workloadID)
	p.out.groups[i].ops = append(p.out.groups[i].ops, w)
}

// groupOf is the index of a workload's group, created (empty) if need be.
func (p *planBuilder) groupOf(workloadID string) int {
	if p.index == nil {
		p.index = map[string]int{}
	}
	i, ok := p.index[workloadID]
	if !ok {
		i = len(p.out.groups)
		p.index[workloadID] = i
		p.out.groups = append(p.out.groups, group{workload: workloadID})
	}
	return i
}

// join puts every later write of workload b in a's group: a consolidation
// move commits with the workload it makes room for, or not at all. (A
// moved workload has no writes before its move's: work evicted or placed
// in a cycle never moves in it.)
func (p *planBuilder) join(a, b string) {
	p.index[b] = p.groupOf(a)
}

// planWrites turns a plan into writes, reading the cache for the keys of
// the bindings it deletes. Called with the cache locked, on the state the
// plan was computed from (Cycle leaves it as it was).
//
//   - A binding is a put of {node}/{project}.{workload}.{pod} if absent,
//     with the pod's key (PrefixPods) put if absent too: etcd itself then
//     refuses a second binding of the same pod, whatever the model
//     believed. A pod still bound elsewhere (its node was lost) has that
//     binding and its pod key deleted; it is bound again next cycle.
//   - An eviction deletes the pods' binding keys (each if unchanged) and
//     their pod keys, and puts one PREEMPTED event under PrefixEvictions.
//   - A consolidation move (moves.go) is one group with the workload it
//     makes room for: each moved pod's old binding deleted (if unchanged),
//     its new one created (if absent) and its pod key replaced, the
//     event naming where it went and why, and that workload's bindings.
//   - Orphans: bindings of workloads the model no longer holds (deleted,
//     finished, suspended) are deleted; those on lost nodes also get a
//     NODE_LOST event.
func (c *Cache) planWrites(plan scheduling.Plan, now time.Time) writes {
	var pb planBuilder
	seq := 0
	event := func(workloadID string, ev *workloadv1.WorkloadEvent) {
		seq++
		key := fmt.Sprintf("%s%s/%020d-%d", etcdstore.PrefixEvictions, workloadID, now.UnixNano(), seq)
		pb.add(workloadID, write{key: key, msg: ev})
	}
	deleted := map[string]bool{}
	podsFreed := map[podKey]bool{}
	del := func(bid string) {
		b, ok := c.bindings[bid]
		if !ok || deleted[bid] {
			return
		}
		deleted[bid] = true
		pb.add(b.Workload, write{key: etcdstore.PrefixBindings + bid, modRev: b.Revision, checked: true})
		// Unconditional: the binding delete beside it is conditional, and
		// the pod key exists while a binding of the pod does.
		if pk := (podKey{b.Workload, b.Pod}); !podsFreed[pk] {
			podsFreed[pk] = true
			pb.add(b.Workload, write{key: podKeyOf(b.Workload, b.Pod)})
		}
	}
	mv := movesOf(plan)
	for _, e := range plan.Evictions {
		c.takeUp(e.Workload)
		w := c.state.Workload(e.Workload)
		if w == nil {
			continue
		}
		move := e.Rule == scheduling.RuleConsolidation && e.For != ""
		if move {
			pb.join(e.For, e.Workload)
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
			pk := podKey{e.Workload, pod}
			bid := c.byPod[pk]
			if old, ok := c.bindings[bid]; ok && move && !deleted[bid] && mv.rebound(pk) {
				deleted[bid] = true
				for _, op := range moveWrites(bid, old, mv.to[pk]) {
					pb.add(e.Workload, op)
				}
				mv.done[pk] = true
				continue
			}
			del(bid)
		}
		ev := &workloadv1.WorkloadEvent{
			Type: workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED, Time: timestamppb.New(now),
			Message: e.Reason, Rule: ruleOf(e.Rule), Pods: int32(len(pods)), Nodes: nodesOf(w, pods),
		}
		if e.For != "" {
			ev.By = takenBy(e.Workload, e.For)
		}
		if move {
			mv.describe(ev, e)
		}
		event(e.Workload, ev)
	}
	c.writing = "" // orphans: no one workload's plan
	c.orphanWrites(del, event, now)
	for _, b := range plan.Bindings {
		c.takeUp(b.Workload)
		if mv.done[podKey{b.Workload, b.Pod}] {
			continue // written with its move
		}
		id := bindingID(b.Node, b.Workload, b.Pod)
		if old, ok := c.byPod[podKey{b.Workload, b.Pod}]; ok {
			// Still bound (elsewhere: its node was lost; or here, stale):
			// that binding and its pod key go now, the pod is bound again
			// next cycle, so a pod key is only ever created, never replaced.
			del(old)
			continue
		}
		pb.add(b.Workload, write{key: etcdstore.PrefixBindings + id, msg: boundStatus(b), checked: true})
		pb.add(b.Workload, write{key: podKeyOf(b.Workload, b.Pod), msg: podKeyStatus(b), checked: true})
	}
	return pb.out
}

// boundStatus is the value of a binding's key.
func boundStatus(b scheduling.Binding) *workloadv1.PodStatus {
	ps := &workloadv1.PodStatus{Index: int32(b.Pod), Node: "nodes/" + b.Node, FractionMilli: int32(b.Share),
		State: workloadv1.PodState_POD_STATE_BOUND}
	for _, d := range b.Devices {
		ps.DeviceIndexes = append(ps.DeviceIndexes, int32(d))
	}
	return ps
}

// podKeyStatus is the value of a bound pod's key (PrefixPods).
func podKeyStatus(b scheduling.Binding) *workloadv1.PodStatus {
	return &workloadv1.PodStatus{Index: int32(b.Pod), Node: "nodes/" + b.Node}
}

// podKeyOf is the key that exists while pod pod of workload workloadID (a
// cluster ID) is bound: PrefixPods + {project}/{workload}/{pod}.
func podKeyOf(workloadID string, pod int) string {
	return etcdstore.PrefixPods + workloadID + "/" + strconv.Itoa(pod)
}

// nodeGone says why a node's bindings must go (NODE_LOST, NODE_DRAINED), or
// UNSPECIFIED when they stay.
func (c *Cache) nodeGone(id string) workloadv1.SchedulingRule {
	n, ok := c.nodes[id]
	switch {
	case !ok:
		if c.graces.missingInGrace(id) {
			return workloadv1.SchedulingRule_SCHEDULING_RULE_UNSPECIFIED
		}
		return workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_LOST
	case n.GetReadiness() != nodemanagerv1.Readiness_READINESS_READY && !c.graces.unreadyInGrace(id, n):
		return workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_LOST
	case n.GetDrained() && n.GetDrainEvicts():
		return workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_DRAINED
	}
	return workloadv1.SchedulingRule_SCHEDULING_RULE_UNSPECIFIED
}

// errGroupTooLarge: one workload's writes do not fit in one transaction of
// the configured MaxOps; raise etcd's --max-txn-ops (and Config.MaxOps).
var errGroupTooLarge = errors.New("one workload's writes exceed the transaction limit")

// applied is what apply wrote: the revision of the last transaction, and
// of the last one that wrote a binding (the revision the model must reach
// before the next cycle); dropped names the workloads whose writes were
// not committed, with why.
type applied struct {
	rev, bindingRev int64
	done            writes // the groups committed
	dropped         map[string]error
}

// apply commits a plan's writes fenced by f. Whole workload groups are
// packed into transactions of at most maxOps-1 writes (each write may carry
// a condition, and the fence is one more), in plan order, evictions before
// bindings; a group is never split. A group larger than one transaction is
// not written (errGroupTooLarge, in dropped) and the rest goes on. A leader
// deposed between two transactions leaves a prefix of whole groups
// written, which is safe: evictions without their bindings leave room
// free, and the next leader plans from what is in etcd. The first failed
// transaction ends the apply with its error.
func apply(ctx context.Context, client *clientv3.Client, f fence, w writes, maxOps int) (applied, error) {
	if maxOps <= 0 {
		maxOps = etcdstore.DefaultMaxOps
	}
	limit := max(1, maxOps-1)
	out := applied{dropped: map[string]error{}}
	type txn struct {
		ops    []write
		groups []group
	}
	var txns []txn
	var cur txn
	flush := func() {
		if len(cur.ops) > 0 {
			txns = append(txns, cur)
			cur = txn{}
		}
	}
	for _, g := range w.groups {
		if len(g.ops) > limit {
			out.dropped[g.workload] = fmt.Errorf("workload %s: %d writes, over %d per transaction: %w", g.workload, len(g.ops), limit, errGroupTooLarge)
			continue
		}
		if len(cur.ops)+len(g.ops) > limit {
			flush()
		}
		cur.ops = append(cur.ops, g.ops...)
		cur.groups = append(cur.groups, g)
	}
	// reasons and usage are independent records: any split is fine
	for _, r := range append(append([]write(nil), w.reasons...), w.usage...) {
		if len(cur.ops) == limit {
			flush()
		}
		cur.ops = append(cur.ops, r)
	}
	flush()
	for i, t := range txns {
		ops := t.ops
		b := etcdstore.NewBatch(client)
		b.MaxOps = maxOps
		b.Fence(f.Key, f.Rev)
		binds := false
		for _, op := range ops {
			binds = binds || strings.HasPrefix(op.key, etcdstore.PrefixBindings)
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
			return out, fmt.Errorf("apply plan (transaction %d of %d, %d writes): %w", i+1, len(txns), len(ops), err)
		}
		out.rev = r
		out.done.groups = append(out.done.groups, t.groups...)
		if binds {
			out.bindingRev = r
		}
	}
	return out, nil
}

func ruleOf(r scheduling.Rule) workloadv1.SchedulingRule {
	switch r {
	case scheduling.RuleReclaim:
		return workloadv1.SchedulingRule_SCHEDULING_RULE_RECLAIM
	case scheduling.RulePreempt:
		return workloadv1.SchedulingRule_SCHEDULING_RULE_PREEMPT
	case scheduling.RuleGangMinimum:
		return workloadv1.SchedulingRule_SCHEDULING_RULE_GANG_MINIMUM
	case scheduling.RuleConsolidation:
		return workloadv1.SchedulingRule_SCHEDULING_RULE_CONSOLIDATION
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
// takenBy is a PREEMPTED event's `by`: the workload that took the
// resources when it is of the victim's own project, its project alone when
// it is another tenant's (whose workloads the victim's viewers must not
// learn).
func takenBy(victim, forW string) string {
	if projectOf(forW) != projectOf(victim) {
		return "projects/" + projectOf(forW)
	}
	return workloadName(forW)
}

func workloadName(id string) string {
	for i := range len(id) {
		if id[i] == '/' {
			return "projects/" + id[:i] + "/workloads/" + id[i+1:]
		}
	}
	return id
}
