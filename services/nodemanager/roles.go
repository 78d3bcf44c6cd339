package nodemanager

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// SetNodeRoles replaces a node's roles: the roles key and the node key in
// one Txn, as a drain is written, so that the roles outlive the node's
// lease. An empty list is stored too (an empty key): in Kubernetes mode
// the runtime must see it to take the labels off. Idempotent.
func (s *Server) SetNodeRoles(ctx context.Context, req *nodemanagerv1.SetNodeRolesRequest) (*nodemanagerv1.Node, error) {
	if _, err := nodeOf("name", req.GetName()); err != nil {
		return nil, err
	}
	roles, err := CheckRoles("roles", req.GetRoles())
	if err != nil {
		return nil, err
	}
	stored := &nodemanagerv1.SetNodeRolesRequest{Name: req.GetName(), Roles: roles}
	return s.update(ctx, req.GetName(), req.GetEtag(), func(id string, n *nodemanagerv1.Node) (string, proto.Message) {
		n.Roles = roles
		return RolesKey(id), stored
	})
}

// CheckRoles returns roles sorted, or INVALID_FIELD naming the first
// unknown or repeated one.
func CheckRoles(field string, roles []nodemanagerv1.NodeRole) ([]nodemanagerv1.NodeRole, error) {
	for i, r := range roles {
		if r == nodemanagerv1.NodeRole_NODE_ROLE_UNSPECIFIED || nodemanagerv1.NodeRole_name[int32(r)] == "" {
			return nil, apierr.InvalidField(fmt.Sprintf("%s[%d]", field, i), "must be NODE_ROLE_SYSTEM, NODE_ROLE_GPU_WORKER or NODE_ROLE_CPU_WORKER")
		}
		if slices.Contains(roles[:i], r) {
			return nil, apierr.InvalidField(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("repeats %s", r))
		}
	}
	out := slices.Clone(roles)
	slices.Sort(out)
	return out, nil
}
