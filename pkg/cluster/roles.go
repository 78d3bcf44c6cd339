package cluster

import "strings"

// NodeRoles are the roles an administrator gave a node (the product's
// system, GPU worker and CPU worker), a set of bits. Placement honours them
// (pkg/placement roles.go) once any node of the cluster has the role that
// applies; a node with none is an ordinary node.
type NodeRoles uint8

// The node roles.
const (
	RoleSystem    NodeRoles = 1 << iota // runs the platform's own services, no workload
	RoleGPUWorker                       // takes GPU workloads
	RoleCPUWorker                       // takes CPU-only workloads
)

// roleNames are the roles in bit order, as people and scenarios write them.
var roleNames = [...]string{"system", "gpu-worker", "cpu-worker"}

// Has reports whether every role of r is in rs.
func (rs NodeRoles) Has(r NodeRoles) bool { return rs&r == r }

func (rs NodeRoles) String() string {
	var out []string
	for i, name := range roleNames {
		if rs&(1<<i) != 0 {
			out = append(out, name)
		}
	}
	return strings.Join(out, ",")
}

// RoleInUse reports whether any node of the cluster has role r.
func (s *State) RoleInUse(r NodeRoles) bool {
	for i := range roleNames {
		if r&(1<<i) != 0 && s.roleNodes[i] > 0 {
			return true
		}
	}
	return false
}

// countRoles adds (sign 1) or takes away (-1) a node's roles from the
// cluster's counts.
func (s *State) countRoles(rs NodeRoles, sign int) {
	for i := range roleNames {
		if rs&(1<<i) != 0 {
			s.roleNodes[i] += sign
		}
	}
}
