package quota

import (
	"context"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// poolCapacity is what a node pool can give, for the over-subscription check.
type poolCapacity struct {
	// known is false while no node of the pool is registered: before the
	// first agent registers, a pool's size is not 0 but unknown, and quotas
	// are usually set up before nodes join, so the check against capacity is
	// skipped for such a pool rather than rejecting every deserved quota.
	known bool
	// total sums the allocatable resources (capacity when an agent reports
	// no allocatable) of the pool's Ready, undrained nodes: the pool total T
	// of SCHEDULING.md §1, as the node proto defines it.
	total cluster.Resources
}

// capacities reads the node keys (owned by the node manager; read only
// here) and returns each pool's capacity by pool name. A node's pool is its
// node_pool as the node manager set it; a node without one is assigned here
// as the node manager would: the oldest pool whose selector matches its
// labels, else nodepools/default.
func (s *store) capacities(ctx context.Context, pools []etcdstore.Item[*quotav1.NodePool]) (map[string]poolCapacity, error) {
	nodes, _, err := s.nodes.ListAll(ctx, "")
	if err != nil {
		return nil, err
	}
	out := map[string]poolCapacity{}
	for _, it := range nodes {
		n := it.Msg
		pool := n.GetNodePool()
		if pool == "" {
			pool = clusterproto.PoolOf(n.GetLabels(), msgs(pools))
		}
		c := out[pool]
		c.known = true
		if n.GetReadiness() == nodemanagerv1.Readiness_READINESS_READY && !n.GetDrained() {
			q := n.GetAllocatable()
			if q == nil {
				q = n.GetCapacity()
			}
			c.total = c.total.Add(cluster.Resources{GPU: q.GetMilliGpus(), CPU: q.GetMilliCpu(), Memory: q.GetMemoryBytes()})
		}
		out[pool] = c
	}
	return out, nil
}

func msgs(items []etcdstore.Item[*quotav1.NodePool]) []*quotav1.NodePool {
	out := make([]*quotav1.NodePool, len(items))
	for i, it := range items {
		out[i] = it.Msg
	}
	return out
}
