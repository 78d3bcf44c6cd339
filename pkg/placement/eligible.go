package placement

import "github.com/runwayhq/runway/pkg/cluster"

// Eligible is the first placement step, before any resource is counted:
// whether node n may take pods of w at all. It composes the node filters,
// each a small function of the node and the workload:
//
//	node type  w.NodeType set: only nodes of that run.ai/type
//	role       the node roles in use (RoleAllows)
//
// Every place that decides where a workload could go (Place, and the
// scheduler's reclaim and consolidation, which look for nodes to free or to
// move to) asks it, so that none frees room a workload cannot use.
func Eligible(s *cluster.State, n *cluster.Node, w *cluster.Workload) bool {
	return TypeAllows(n, w) && RoleAllows(s, n, w)
}

// TypeAllows: a workload that names a node type goes only to nodes of it.
func TypeAllows(n *cluster.Node, w *cluster.Workload) bool {
	return w.NodeType == "" || n.Type() == w.NodeType
}

// RoleAllows is the node-role step. A GPU workload (any GPU or GPU memory)
// needs a gpu-worker node, a CPU-only one a cpu-worker node, once any node
// of the cluster has that worker role; while none has it, any node but a
// system node (which runs only the platform's own services) will do. A
// system node that also has the worker role a workload needs takes it.
// Without roles on any node every node is allowed, as before roles existed.
func RoleAllows(s *cluster.State, n *cluster.Node, w *cluster.Workload) bool {
	need := neededRole(w)
	switch {
	case n.Roles.Has(need):
		return true
	case s.RoleInUse(need):
		return false
	}
	return !n.Roles.Has(cluster.RoleSystem)
}

// neededRole is the worker role a pod of w needs.
func neededRole(w *cluster.Workload) cluster.NodeRoles {
	if w.Pod.GPU+w.Pod.GPUMemory > 0 {
		return cluster.RoleGPUWorker
	}
	return cluster.RoleCPUWorker
}

// roleText names the nodes the role step leaves w, for a miss's sentence
// ("gpu-worker ", "non-system "); empty when roles do not narrow them.
func roleText(s *cluster.State, w *cluster.Workload) string {
	switch need := neededRole(w); {
	case s.RoleInUse(need):
		return need.String() + " "
	case s.RoleInUse(cluster.RoleSystem):
		return "non-system "
	}
	return ""
}
