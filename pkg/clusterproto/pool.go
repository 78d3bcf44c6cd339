package clusterproto

import quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"

// DefaultPoolName is the node pool every node belongs to unless a pool's
// selector claims it.
const DefaultPoolName = "nodepools/default"

// NodePoolName is a node's recorded pool (Node.node_pool) as a resource
// name: DefaultPoolName when the node records none.
func NodePoolName(recorded string) string {
	if recorded == "" {
		return DefaultPoolName
	}
	return recorded
}

// PoolOf is the node pool a node with these labels belongs to: the oldest
// pool (create_time, then name) whose non-empty selector all its labels
// match, else nodepools/default (NodePool's comment in node_pool.proto).
// The node manager records the answer in Node.node_pool at registration.
func PoolOf(labels map[string]string, pools []*quotav1.NodePool) string {
	var best *quotav1.NodePool
	for _, p := range pools {
		if len(p.GetNodeSelector()) == 0 || !matches(labels, p.GetNodeSelector()) {
			continue
		}
		if best == nil || older(p, best) {
			best = p
		}
	}
	if best == nil {
		return DefaultPoolName
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
