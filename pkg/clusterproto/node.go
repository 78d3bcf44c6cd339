package clusterproto

import (
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/cluster"
)

// roleBits maps the API's node roles to the model's.
var roleBits = map[nodemanagerv1.NodeRole]cluster.NodeRoles{
	nodemanagerv1.NodeRole_NODE_ROLE_SYSTEM:     cluster.RoleSystem,
	nodemanagerv1.NodeRole_NODE_ROLE_GPU_WORKER: cluster.RoleGPUWorker,
	nodemanagerv1.NodeRole_NODE_ROLE_CPU_WORKER: cluster.RoleCPUWorker,
}

// ToNodeRoles is a node's roles (Node.roles) as placement reads them;
// unknown values count as none.
func ToNodeRoles(roles []nodemanagerv1.NodeRole) cluster.NodeRoles {
	var out cluster.NodeRoles
	for _, r := range roles {
		out |= roleBits[r]
	}
	return out
}
