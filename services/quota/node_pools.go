package quota

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// GetNodePool returns one node pool.
func (s *Server) GetNodePool(ctx context.Context, req *quotav1.GetNodePoolRequest) (*quotav1.NodePool, error) {
	id, err := parseName("name", req.GetName(), nodePoolsCollection)
	if err != nil {
		return nil, err
	}
	it, err := s.store.pools.Get(ctx, id)
	if err != nil {
		return nil, storeErr(err, apierr.NodePool, req.GetName())
	}
	return fromItem(it), nil
}

// ListNodePools returns a page of node pools in name order.
func (s *Server) ListNodePools(ctx context.Context, req *quotav1.ListNodePoolsRequest) (*quotav1.ListNodePoolsResponse, error) {
	if err := checkPageSize(req.GetPageSize()); err != nil {
		return nil, err
	}
	page, err := s.store.pools.List(ctx, "", int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, storeErr(err, apierr.NodePool, "")
	}
	resp := &quotav1.ListNodePoolsResponse{NextPageToken: page.NextPageToken}
	for _, it := range page.Items {
		resp.NodePools = append(resp.NodePools, fromItem(it))
	}
	return resp, nil
}

// CreateNodePool stores a new node pool with its defaults filled in.
func (s *Server) CreateNodePool(ctx context.Context, req *quotav1.CreateNodePoolRequest) (*quotav1.NodePool, error) {
	var v violations
	v.checkID("node_pool_id", req.GetNodePoolId())
	v.checkRequired("node_pool", req.GetNodePool() == nil)
	id, now := req.GetNodePoolId(), s.timestamp()
	np := &quotav1.NodePool{}
	if req.GetNodePool() != nil {
		np = proto.Clone(req.GetNodePool()).(*quotav1.NodePool)
	}
	np.Name, np.Uid, np.CreateTime, np.UpdateTime, np.Etag = nodePoolsCollection+"/"+id, newUID(), now, now, ""
	fillNodePool(np)
	if req.GetNodePool() != nil {
		v.checkNodePool("node_pool", np, id)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	it, err := s.store.pools.Create(ctx, id, np)
	if err != nil {
		return nil, storeErr(err, apierr.NodePool, np.GetName())
	}
	return fromItem(it), nil
}

// UpdateNodePool changes the fields of update_mask.
func (s *Server) UpdateNodePool(ctx context.Context, req *quotav1.UpdateNodePoolRequest) (*quotav1.NodePool, error) {
	in := req.GetNodePool()
	var v violations
	v.checkRequired("node_pool", in == nil)
	id := ""
	if in != nil {
		id = v.checkName("node_pool.name", in.GetName(), nodePoolsCollection)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	var out *quotav1.NodePool
	err := retry(in.GetName(), func() error {
		cur, err := s.store.pools.Get(ctx, id)
		if err != nil {
			return storeErr(err, apierr.NodePool, in.GetName())
		}
		if err := checkEtag(in.GetName(), in.GetEtag(), cur.Etag); err != nil {
			return err
		}
		paths, err := resolveMask(req.GetUpdateMask(), in, cur.Msg, nodePoolFields)
		if err != nil {
			return err
		}
		next := proto.Clone(cur.Msg).(*quotav1.NodePool)
		applyMask(next, proto.Clone(in), paths)
		fillNodePool(next)
		var v violations
		if v.checkNodePool("node_pool", next, id); len(v) > 0 {
			return v.err()
		}
		if unchanged(cur.Msg, next, cur.Msg.GetUpdateTime()) {
			out = fromItem(cur)
			return nil
		}
		next.UpdateTime = s.timestamp()
		c := &change{}
		c.put(s.store.pools.Key(id), next, cur.Revision)
		rev, err := s.store.commit(ctx, c)
		if err != nil {
			return storeErr(err, apierr.NodePool, in.GetName())
		}
		out = withEtag(next, rev)
		return nil
	})
	return out, err
}

// DeleteNodePool removes a node pool nothing refers to any more.
func (s *Server) DeleteNodePool(ctx context.Context, req *quotav1.DeleteNodePoolRequest) (*emptypb.Empty, error) {
	name := req.GetName()
	id, err := parseName("name", name, nodePoolsCollection)
	if err != nil {
		return nil, err
	}
	if id == builtInID {
		return nil, apierr.FailedPrecondition(commonv1.ErrorReason_NODE_POOL_IN_USE, name,
			"Node pool "+quote(name)+" is built in and holds every node no other pool selects; it cannot be deleted.")
	}
	err = retry(name, func() error {
		cur, err := s.store.pools.Get(ctx, id)
		if err != nil {
			return storeErr(err, apierr.NodePool, name)
		}
		if err := checkEtag(name, req.GetEtag(), cur.Etag); err != nil {
			return err
		}
		c := &change{}
		used, err := s.poolInUse(ctx, c, name)
		if err != nil {
			return err
		}
		if used {
			return apierr.FailedPrecondition(commonv1.ErrorReason_NODE_POOL_IN_USE, name,
				"Node pool "+quote(name)+" is still named by a quota, a project's default node pools or a workload; remove those references first.")
		}
		c.del(s.store.pools.Key(id), cur.Revision)
		_, err = s.store.commit(ctx, c)
		return storeErr(err, apierr.NodePool, name)
	})
	if err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// poolInUse reports whether a department's or project's quota, a project's
// default node pools or a workload names pool, and guards c on each of those
// prefixes so that a reference added meanwhile makes the delete retry.
func (s *Server) poolInUse(ctx context.Context, c *change, pool string) (bool, error) {
	depts, rev, err := s.store.departments.ListAll(ctx, "")
	if err != nil {
		return false, storeErr(err, apierr.Department, "")
	}
	c.unchangedSince(s.store.departments.Prefix(), rev)
	for _, d := range depts {
		if namesPool(d.Msg.GetNodePoolQuotas(), pool) {
			return true, nil
		}
	}
	projects, rev, err := s.store.projects.ListAll(ctx, "")
	if err != nil {
		return false, storeErr(err, apierr.Project, "")
	}
	c.unchangedSince(s.store.projects.Prefix(), rev)
	for _, p := range projects {
		if namesPool(p.Msg.GetNodePoolQuotas(), pool) || slices.Contains(p.Msg.GetDefaultNodePools(), pool) {
			return true, nil
		}
	}
	workloads, rev, err := s.store.workloads.ListAll(ctx, "")
	if err != nil {
		return false, storeErr(err, apierr.Workload, "")
	}
	c.unchangedSince(s.store.workloads.Prefix(), rev)
	for _, w := range workloads {
		if slices.Contains(w.Msg.GetSpec().GetNodePools(), pool) || w.Msg.GetStatus().GetNodePool() == pool {
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
