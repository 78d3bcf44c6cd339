package scheduler

import (
	"context"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// The leader publishes each waiting workload's reasons under
// etcdstore.PrefixReasons ({project}/{workload}, a WorkloadStatus with only
// pending_reasons set), in the plan's fenced transaction, so the Workload
// service can fold them into status.pending_reasons. It keeps in memory
// what it last wrote per workload and writes only differences: a record
// whose reasons are unchanged is not rewritten, and the record of a
// workload no longer waiting (placed, gone, suspended) is deleted. The
// cache does not watch this prefix, so these writes never start a cycle by
// themselves; the status update they cause is a status-only change of the
// workload, after which the next cycle finds nothing to write.

// staleReasons marks a record found at the start of a leadership: it never
// equals a real set of reasons, so each such record is rewritten (or
// deleted) once by the new leader.
const staleReasons = "\x00stale"

// loadReasons returns the records present under PrefixReasons, each marked
// stale: what a new leader starts from.
func loadReasons(ctx context.Context, client *clientv3.Client) (map[string]string, error) {
	resp, err := client.Get(ctx, etcdstore.PrefixReasons, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), etcdstore.PrefixReasons)] = staleReasons
	}
	return out, nil
}

// reasonsWrites are the puts and deletes that bring the records from
// written (what was last written, by workload ID) to the plan's waiting
// workloads, and the new content of written once they are committed.
func reasonsWrites(written map[string]string, waiting []scheduling.Waiting) ([]write, map[string]string) {
	next := make(map[string]string, len(waiting))
	var out []write
	for _, w := range waiting {
		joined := strings.Join(scheduling.Texts(w.Reasons), "\n")
		next[w.Workload] = joined
		if old, ok := written[w.Workload]; ok && old == joined {
			continue
		}
		st := &workloadv1.WorkloadStatus{}
		for _, r := range w.Reasons {
			st.PendingReasons = append(st.PendingReasons, pendingReason(r))
		}
		out = append(out, write{key: etcdstore.PrefixReasons + w.Workload, msg: st})
	}
	var gone []string
	for id := range written {
		if _, ok := next[id]; !ok {
			gone = append(gone, id)
		}
	}
	sort.Strings(gone)
	for _, id := range gone {
		out = append(out, write{key: etcdstore.PrefixReasons + id})
	}
	return out, next
}

// pendingChecks are the API's names of the core's checks.
var pendingChecks = map[scheduling.Check]workloadv1.PendingCheck{
	scheduling.CheckLimit:                  workloadv1.PendingCheck_PENDING_CHECK_LIMIT,
	scheduling.CheckNonPreemptibleDeserved: workloadv1.PendingCheck_PENDING_CHECK_NON_PREEMPTIBLE_DESERVED,
	scheduling.CheckNodePool:               workloadv1.PendingCheck_PENDING_CHECK_NODE_POOL,
	scheduling.CheckNodeType:               workloadv1.PendingCheck_PENDING_CHECK_NODE_TYPE,
	scheduling.CheckCapacity:               workloadv1.PendingCheck_PENDING_CHECK_CAPACITY,
	scheduling.CheckGang:                   workloadv1.PendingCheck_PENDING_CHECK_GANG,
	scheduling.CheckReclaim:                workloadv1.PendingCheck_PENDING_CHECK_RECLAIM,
	scheduling.CheckPreempt:                workloadv1.PendingCheck_PENDING_CHECK_PREEMPT,
}

// pendingReason is one reason as the API shows it: the check clients branch
// on, where it ran, and the sentence for people.
func pendingReason(r scheduling.Reason) *workloadv1.PendingReason {
	out := &workloadv1.PendingReason{Check: pendingChecks[r.Check], Message: r.Text, Queue: r.Queue, NodeCount: int32(r.Nodes)}
	if r.Requested != (cluster.Resources{}) {
		out.Requested = quantity(r.Requested)
	}
	if r.Requested != (cluster.Resources{}) || r.Available != (cluster.Resources{}) {
		out.Available = quantity(r.Available)
	}
	if r.Pool != "" {
		out.NodePool = "nodepools/" + r.Pool
	}
	return out
}
