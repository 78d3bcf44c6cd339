package quota

import (
	"context"
	"slices"

	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// nodePoolKind is what the shared flow (resource.go) needs of node pools.
// A node pool depends on nothing else when written, so it has no prepare.
var nodePoolKind = resourceKind[*quotav1.NodePool]{
	collection: nodePoolsCollection,
	field:      "node_pool",
	idField:    "node_pool_id",
	resource:   apierr.NodePool,
	fields:     nodePoolFields,
	items:      func(st *store) *etcdstore.Collection[*quotav1.NodePool] { return st.pools },
	fill:       fillNodePool,
	check:      (*violations).checkNodePool,
	builtIn: func(name string) error {
		return apierr.FailedPrecondition(commonv1.ErrorReason_NODE_POOL_IN_USE, name,
			"Node pool "+quote(name)+" is built in and holds every node no other pool selects; it cannot be deleted.")
	},
	inUse: func(s *Server, ctx context.Context, c *change, name, _ string) error {
		used, err := s.poolInUse(ctx, c, name)
		if err != nil || !used {
			return err
		}
		return apierr.FailedPrecondition(commonv1.ErrorReason_NODE_POOL_IN_USE, name,
			"Node pool "+quote(name)+" is still named by a quota, a project's default node pools or a workload; remove those references first.")
	},
}

// GetNodePool returns one node pool.
func (s *Server) GetNodePool(ctx context.Context, req *quotav1.GetNodePoolRequest) (*quotav1.NodePool, error) {
	return nodePoolKind.get(ctx, s, req.GetName())
}

// ListNodePools returns a page of node pools in name order.
func (s *Server) ListNodePools(ctx context.Context, req *quotav1.ListNodePoolsRequest) (*quotav1.ListNodePoolsResponse, error) {
	pools, next, err := nodePoolKind.list(ctx, s, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &quotav1.ListNodePoolsResponse{NodePools: pools, NextPageToken: next}, nil
}

// CreateNodePool stores a new node pool with its defaults filled in. Unlike
// departments and projects it refers to nothing, so it is a plain Create
// rather than a conditioned change.
func (s *Server) CreateNodePool(ctx context.Context, req *quotav1.CreateNodePoolRequest) (*quotav1.NodePool, error) {
	np, err := nodePoolKind.build(s, req.GetNodePoolId(), req.GetNodePool())
	if err != nil {
		return nil, err
	}
	it, err := s.store.pools.Create(ctx, req.GetNodePoolId(), np)
	if err != nil {
		return nil, storeErr(err, apierr.NodePool, np.GetName())
	}
	return fromItem(it), nil
}

// UpdateNodePool changes the fields of update_mask.
func (s *Server) UpdateNodePool(ctx context.Context, req *quotav1.UpdateNodePoolRequest) (*quotav1.NodePool, error) {
	return nodePoolKind.update(ctx, s, req.GetNodePool(), req.GetUpdateMask())
}

// DeleteNodePool removes a node pool nothing refers to any more.
func (s *Server) DeleteNodePool(ctx context.Context, req *quotav1.DeleteNodePoolRequest) (*emptypb.Empty, error) {
	return nodePoolKind.delete(ctx, s, req.GetName(), req.GetEtag())
}

// poolInUse reports whether the settings' default node pool, a
// department's or project's quota, a project's default node pools or a
// workload names pool, and guards c on each of those keys and prefixes so
// that a reference added meanwhile makes the delete retry.
func (s *Server) poolInUse(ctx context.Context, c *change, pool string) (bool, error) {
	st, err := s.currentSettings(ctx, c)
	if err != nil || st.GetDefaultNodePool() == pool {
		return err == nil, err
	}
	depts, err := readAll(ctx, s.store.departments, c, apierr.Department)
	if err != nil {
		return false, err
	}
	for _, d := range depts {
		if namesPool(d.GetNodePoolQuotas(), pool) {
			return true, nil
		}
	}
	projects, err := s.allProjects(ctx, c)
	if err != nil {
		return false, err
	}
	for _, p := range projects {
		if namesPool(p.GetNodePoolQuotas(), pool) || slices.Contains(p.GetDefaultNodePools(), pool) {
			return true, nil
		}
	}
	workloads, err := readAll(ctx, s.store.workloads, c, apierr.Workload)
	if err != nil {
		return false, err
	}
	for _, w := range workloads {
		if slices.Contains(w.GetSpec().GetNodePools(), pool) || w.GetStatus().GetNodePool() == pool {
			return true, nil
		}
	}
	return false, nil
}

func namesPool(qs []*quotav1.NodePoolQuota, pool string) bool {
	return slices.ContainsFunc(qs, func(q *quotav1.NodePoolQuota) bool { return q.GetNodePool() == pool })
}

// poolRefs reads every node pool once and conditions c on each pool in
// names still being the one read, so a quota never names a pool that was
// deleted meanwhile. A name that does not exist is NODE_POOL_NOT_FOUND on
// the field that carries it (fields[i] for names[i]).
func (s *Server) poolRefs(ctx context.Context, c *change, names, fields []string) ([]etcdstore.Item[*quotav1.NodePool], error) {
	pools, _, err := s.store.pools.ListAll(ctx, "")
	if err != nil {
		return nil, storeErr(err, apierr.NodePool, "")
	}
	byName := map[string]etcdstore.Item[*quotav1.NodePool]{}
	for _, it := range pools {
		byName[it.Msg.GetName()] = it
	}
	checked := map[string]bool{}
	for i, name := range names {
		it, ok := byName[name]
		if !ok {
			return nil, apierr.NotFound(apierr.NodePool, name).InField(fields[i])
		}
		if !checked[name] {
			c.check(s.store.pools.Key(it.ID), it.Revision)
			checked[name] = true
		}
	}
	return pools, nil
}

func quote(s string) string { return `"` + s + `"` }
