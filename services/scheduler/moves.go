package scheduler

import (
	"slices"
	"strings"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// moves are a plan's consolidation moves (SCHEDULING.md "Consolidate"):
// the plan evicts each moved unit and binds it again in the pool, and
// planWrites writes both as one move, so that the unit is never left
// unbound by a plan that made room with it.
type moves struct {
	to    map[podKey]scheduling.Binding // the new binding of each pod of a moved workload
	nodes map[string][]string           // the nodes each moved workload goes to, sorted, distinct
	done  map[podKey]bool               // pods whose move is written
}

// movesOf collects the bindings of the workloads that consolidation
// evicts: the library binds a moved unit again in the same plan, and work
// evicted or placed in a cycle never moves in it, so every binding of
// such a workload is its move's.
func movesOf(plan scheduling.Plan) moves {
	mv := moves{to: map[podKey]scheduling.Binding{}, nodes: map[string][]string{}, done: map[podKey]bool{}}
	moved := map[string]bool{}
	for _, e := range plan.Evictions {
		if e.Rule == scheduling.RuleConsolidation {
			moved[e.Workload] = true
		}
	}
	for _, b := range plan.Bindings {
		if moved[b.Workload] {
			mv.to[podKey{b.Workload, b.Pod}] = b
			mv.nodes[b.Workload] = append(mv.nodes[b.Workload], b.Node)
		}
	}
	for w, ns := range mv.nodes {
		slices.Sort(ns)
		mv.nodes[w] = slices.Compact(ns)
	}
	return mv
}

// rebound reports whether the plan binds pod pk again (it moves).
func (mv moves) rebound(pk podKey) bool {
	_, ok := mv.to[pk]
	return ok
}

// moveWrites moves the pod of binding bid (old) to nb in one transaction.
// The pod key is replaced, not deleted and created: the old binding's
// delete beside it is conditional, and the pod key exists exactly while
// that binding does, so no second binding of the pod can slip in. A pod
// moved on its own node (other devices) has its binding rewritten in
// place, fenced on its revision: its new ModRevision is a new placement
// for the node agent, which restarts the pod.
func moveWrites(bid string, old binding, nb scheduling.Binding) []write {
	id := bindingID(nb.Node, nb.Workload, nb.Pod)
	if id == bid {
		return []write{{key: etcdstore.PrefixBindings + id, msg: boundStatus(nb), modRev: old.Revision, checked: true}}
	}
	// The new binding first: the watch delivers a transaction's events in
	// its order, and the cache keeps a workload whose pod is bound again
	// when the old binding goes Running (recordBinding).
	return []write{
		{key: etcdstore.PrefixBindings + id, msg: boundStatus(nb), checked: true},
		{key: etcdstore.PrefixBindings + bid, modRev: old.Revision, checked: true},
		{key: podKeyOf(nb.Workload, nb.Pod), msg: podKeyStatus(nb)},
	}
}

// describe makes a consolidation eviction's event say where the workload
// went and why.
func (mv moves) describe(ev *workloadv1.WorkloadEvent, e scheduling.Eviction) {
	to := mv.nodes[e.Workload]
	if len(to) == 0 {
		return // the plan did not bind it again: a plain eviction
	}
	var from []string
	for _, n := range ev.GetNodes() {
		from = append(from, strings.TrimPrefix(n, "nodes/"))
	}
	where := "Moved from " + strings.Join(from, ", ") + " to " + strings.Join(to, ", ")
	if rest, ok := strings.CutPrefix(e.Reason, "moved "); ok {
		ev.Message = where + " " + rest
	} else {
		ev.Message = where + ": " + e.Reason
	}
}

// projectOf is the project of a cluster ID "project/workload".
func projectOf(id string) string {
	p, _, _ := strings.Cut(id, "/")
	return p
}
