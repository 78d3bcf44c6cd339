package quota

import (
	"context"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/cluster"
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
			pool = poolOf(n.GetLabels(), pools)
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

// poolOf is the pool a node with these labels belongs to: the oldest pool
// (create_time, then name) whose non-empty selector it matches, else
// nodepools/default (NodePool's comment in node_pool.proto).
func poolOf(labels map[string]string, pools []etcdstore.Item[*quotav1.NodePool]) string {
	best := (*quotav1.NodePool)(nil)
	for _, it := range pools {
		p := it.Msg
		if len(p.GetNodeSelector()) == 0 || !matches(labels, p.GetNodeSelector()) {
			continue
		}
		if best == nil || older(p, best) {
			best = p
		}
	}
	if best == nil {
		return defaultPool
	}
	return best.GetName()
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func older(a, b *quotav1.NodePool) bool {
	ta, tb := a.GetCreateTime().AsTime(), b.GetCreateTime().AsTime()
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.GetName() < b.GetName()
}
