package scheduler

import (
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// orphanIndex finds the bindings that orphanWrites deletes without walking
// every binding each cycle: it keeps the binding ids by workload and by
// node, and the suspects, the workloads and nodes whose bindings may have
// to go. A workload is a suspect from any event of it or of one of its
// bindings until it is found schedulable, or has no binding left; a node
// likewise, and again when its grace period ends. Whether a binding is an
// orphan depends only on its workload's and its node's stored objects (and
// the grace), so every orphan belongs to a suspect, and orphanWrites, which
// checks the suspects' bindings in key order, writes exactly what a walk of
// all bindings in key order would.
type orphanIndex struct {
	byWorkload map[string]map[string]struct{} // binding ids by workload (cluster ID)
	byNode     map[string]map[string]struct{} // binding ids by node
	workloads  map[string]bool                // suspect workloads
	nodes      map[string]bool                // suspect nodes
}

func newOrphanIndex() orphanIndex {
	return orphanIndex{byWorkload: map[string]map[string]struct{}{}, byNode: map[string]map[string]struct{}{},
		workloads: map[string]bool{}, nodes: map[string]bool{}}
}

func (x *orphanIndex) add(id string, b binding) {
	addTo(x.byWorkload, b.Workload, id)
	addTo(x.byNode, b.Node, id)
	x.workloads[b.Workload] = true
	x.nodes[b.Node] = true
}

func (x *orphanIndex) remove(id string, b binding) {
	removeFrom(x.byWorkload, b.Workload, id)
	removeFrom(x.byNode, b.Node, id)
}

func addTo(m map[string]map[string]struct{}, k, id string) {
	s, ok := m[k]
	if !ok {
		s = map[string]struct{}{}
		m[k] = s
	}
	s[id] = struct{}{}
}

func removeFrom(m map[string]map[string]struct{}, k, id string) {
	if s, ok := m[k]; ok {
		delete(s, id)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}

// markBindingsOn marks the bindings on node dirty, to be placed again.
func (c *Cache) markBindingsOn(node string) {
	for bid := range c.orphans.byNode[node] {
		c.dirty[kindBinding][bid] = true
	}
}

// orphanCandidates are the bindings of the suspects that orphanWrites must check,
// sorted; a suspect found good, or left without bindings, is dropped. A bad
// one stays a suspect until its bindings are gone (a plan may fail).
func (c *Cache) orphanCandidates() []string {
	x := &c.orphans
	var ids []string
	for wid := range x.workloads {
		bids, ok := x.byWorkload[wid]
		if raw, stored := c.workloads[wid]; !ok || (stored && schedulable(raw)) {
			delete(x.workloads, wid)
			continue
		}
		for bid := range bids {
			ids = append(ids, bid)
		}
	}
	for node := range x.nodes {
		bids, ok := x.byNode[node]
		if !ok || c.nodeGone(node) == workloadv1.SchedulingRule_SCHEDULING_RULE_UNSPECIFIED {
			delete(x.nodes, node)
			continue
		}
		for bid := range bids {
			ids = append(ids, bid)
		}
	}
	sort.Strings(ids)
	return dedupSorted(ids)
}

func dedupSorted(ids []string) []string {
	out := ids[:0]
	for i, id := range ids {
		if i == 0 || id != ids[i-1] {
			out = append(out, id)
		}
	}
	return out
}

// orphanWrites deletes bindings the model cannot use: their workload is gone
// (or final, or suspended), or their node is lost (deleted or NotReady past
// the grace period: NODE_LOST) or drained with eviction (NODE_DRAINED); the
// pod is scheduled again elsewhere. A node missing or NotReady within the
// grace period, or drained without eviction, keeps its bindings.
func (c *Cache) orphanWrites(del func(string), event func(string, *workloadv1.WorkloadEvent), now time.Time) {
	type lostKey struct {
		workload string
		rule     workloadv1.SchedulingRule
	}
	lost := map[lostKey]int{}
	var lostOrder []lostKey
	for _, bid := range c.orphanCandidates() {
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
		event(k.workload, lostEvent(k.rule, lost[k], now))
	}
}

// lostEvent is the PREEMPTED event of a workload's pods lost with their
// node (NODE_LOST) or evicted by its drain (NODE_DRAINED).
func lostEvent(rule workloadv1.SchedulingRule, pods int, now time.Time) *workloadv1.WorkloadEvent {
	msg := fmt.Sprintf("%d pods lost with their node.", pods)
	if rule == workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_DRAINED {
		msg = fmt.Sprintf("%d pods evicted: their node was drained.", pods)
	}
	return &workloadv1.WorkloadEvent{
		Type: workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED, Time: timestamppb.New(now),
		Message: msg, Rule: rule, Pods: int32(pods),
	}
}
