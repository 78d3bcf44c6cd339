package quota

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// GetDepartment returns one department.
func (s *Server) GetDepartment(ctx context.Context, req *quotav1.GetDepartmentRequest) (*quotav1.Department, error) {
	id, err := parseName("name", req.GetName(), departmentsCollection)
	if err != nil {
		return nil, err
	}
	it, err := s.store.departments.Get(ctx, id)
	if err != nil {
		return nil, storeErr(err, apierr.Department, req.GetName())
	}
	return fromItem(it), nil
}

// ListDepartments returns a page of departments in name order.
func (s *Server) ListDepartments(ctx context.Context, req *quotav1.ListDepartmentsRequest) (*quotav1.ListDepartmentsResponse, error) {
	if err := checkPageSize(req.GetPageSize()); err != nil {
		return nil, err
	}
	page, err := s.store.departments.List(ctx, "", int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, storeErr(err, apierr.Department, "")
	}
	resp := &quotav1.ListDepartmentsResponse{NextPageToken: page.NextPageToken}
	for _, it := range page.Items {
		resp.Departments = append(resp.Departments, fromItem(it))
	}
	return resp, nil
}

// CreateDepartment stores a new department with its quota defaults filled in.
func (s *Server) CreateDepartment(ctx context.Context, req *quotav1.CreateDepartmentRequest) (*quotav1.Department, error) {
	var v violations
	v.checkID("department_id", req.GetDepartmentId())
	v.checkRequired("department", req.GetDepartment() == nil)
	id, now := req.GetDepartmentId(), s.timestamp()
	d := &quotav1.Department{}
	if req.GetDepartment() != nil {
		d = proto.Clone(req.GetDepartment()).(*quotav1.Department)
	}
	d.Name, d.Uid, d.CreateTime, d.UpdateTime, d.Etag = departmentsCollection+"/"+id, newUID(), now, now, ""
	fillDepartment(d)
	if req.GetDepartment() != nil {
		v.checkDepartment("department", d)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	var out *quotav1.Department
	err := retry(d.GetName(), func() error {
		if err := s.absent(ctx, s.store.departments.Key(id), apierr.Department, d.GetName()); err != nil {
			return err
		}
		c := &change{}
		if err := s.prepareDepartment(ctx, c, nil, d); err != nil {
			return err
		}
		c.put(s.store.departments.Key(id), d, 0)
		rev, err := s.store.commit(ctx, c)
		if err != nil {
			return storeErr(err, apierr.Department, d.GetName())
		}
		out = withEtag(proto.Clone(d).(*quotav1.Department), rev)
		return nil
	})
	return out, err
}

// UpdateDepartment changes the fields of update_mask.
func (s *Server) UpdateDepartment(ctx context.Context, req *quotav1.UpdateDepartmentRequest) (*quotav1.Department, error) {
	in := req.GetDepartment()
	var v violations
	v.checkRequired("department", in == nil)
	id := ""
	if in != nil {
		id = v.checkName("department.name", in.GetName(), departmentsCollection)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	var out *quotav1.Department
	err := retry(in.GetName(), func() error {
		cur, err := s.store.departments.Get(ctx, id)
		if err != nil {
			return storeErr(err, apierr.Department, in.GetName())
		}
		if err := checkEtag(in.GetName(), in.GetEtag(), cur.Etag); err != nil {
			return err
		}
		paths, err := resolveMask(req.GetUpdateMask(), in, cur.Msg, departmentFields)
		if err != nil {
			return err
		}
		next := proto.Clone(cur.Msg).(*quotav1.Department)
		applyMask(next, proto.Clone(in), paths)
		fillDepartment(next)
		var v violations
		if v.checkDepartment("department", next); len(v) > 0 {
			return v.err()
		}
		if unchanged(cur.Msg, next, cur.Msg.GetUpdateTime()) {
			out = fromItem(cur)
			return nil
		}
		next.UpdateTime = s.timestamp()
		c := &change{}
		if err := s.prepareDepartment(ctx, c, cur.Msg, next); err != nil {
			return err
		}
		c.put(s.store.departments.Key(id), next, cur.Revision)
		rev, err := s.store.commit(ctx, c)
		if err != nil {
			return storeErr(err, apierr.Department, in.GetName())
		}
		out = withEtag(next, rev)
		return nil
	})
	return out, err
}

// prepareDepartment checks what a department write depends on besides its
// own fields, and conditions c on it: the node pools its quotas name exist,
// and, when over-subscription is rejected, neither its projects nor the
// departments of a pool add up to more than they have (before is nil for a
// create).
func (s *Server) prepareDepartment(ctx context.Context, c *change, before, after *quotav1.Department) error {
	var names, fields []string
	for i, q := range after.GetNodePoolQuotas() {
		names = append(names, q.GetNodePool())
		fields = append(fields, fmt.Sprintf("department.node_pool_quotas[%d].node_pool", i))
	}
	pools, err := s.poolRefs(ctx, c, names, fields)
	if err != nil {
		return err
	}
	reject, err := s.rejectOverSubscription(ctx)
	if err != nil || !reject {
		return err
	}
	projects, err := s.allProjects(ctx, c)
	if err != nil {
		return err
	}
	if err := checkDepartmentLoad(before, after, projects, projects); err != nil {
		return err
	}
	depts, rev, err := s.store.departments.ListAll(ctx, "")
	if err != nil {
		return storeErr(err, apierr.Department, "")
	}
	c.unchangedSince(s.store.departments.Prefix(), rev)
	all := make([]*quotav1.Department, len(depts))
	for i, it := range depts {
		all[i] = it.Msg
	}
	capacity, err := s.store.capacities(ctx, pools)
	if err != nil {
		return storeErr(err, apierr.Node, "")
	}
	return checkPoolLoad(all, replaceDepartment(all, after), capacity)
}

// DeleteDepartment removes a department that holds no project.
func (s *Server) DeleteDepartment(ctx context.Context, req *quotav1.DeleteDepartmentRequest) (*emptypb.Empty, error) {
	name := req.GetName()
	id, err := parseName("name", name, departmentsCollection)
	if err != nil {
		return nil, err
	}
	if id == builtInID {
		return nil, apierr.FailedPrecondition(commonv1.ErrorReason_BUILT_IN_RESOURCE, name,
			"Department "+quote(name)+" is built in and holds every project that names no department; it cannot be deleted.")
	}
	err = retry(name, func() error {
		cur, err := s.store.departments.Get(ctx, id)
		if err != nil {
			return storeErr(err, apierr.Department, name)
		}
		if err := checkEtag(name, req.GetEtag(), cur.Etag); err != nil {
			return err
		}
		c := &change{}
		projects, err := s.allProjects(ctx, c)
		if err != nil {
			return err
		}
		n := 0
		for _, p := range projects {
			if p.GetDepartment() == name {
				n++
			}
		}
		if n > 0 {
			return apierr.FailedPrecondition(commonv1.ErrorReason_DEPARTMENT_NOT_EMPTY, name,
				fmt.Sprintf("Department %q still has %d projects; move or delete them first.", name, n)).
				With("projectCount", strconv.Itoa(n))
		}
		c.del(s.store.departments.Key(id), cur.Revision)
		_, err = s.store.commit(ctx, c)
		return storeErr(err, apierr.Department, name)
	})
	if err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// allProjects reads every project and guards c on the projects prefix, so
// that the change commits only if no project was created or changed since.
func (s *Server) allProjects(ctx context.Context, c *change) ([]*quotav1.Project, error) {
	items, rev, err := s.store.projects.ListAll(ctx, "")
	if err != nil {
		return nil, storeErr(err, apierr.Project, "")
	}
	c.unchangedSince(s.store.projects.Prefix(), rev)
	out := make([]*quotav1.Project, len(items))
	for i, it := range items {
		out[i] = it.Msg
	}
	return out, nil
}

// absent returns ALREADY_EXISTS when key is taken. The create's own
// condition (ModRevision 0) still decides; this only names the reason, since
// a failed condition is otherwise retried as a conflict.
func (s *Server) absent(ctx context.Context, key string, r apierr.Resource, name string) error {
	taken, err := s.store.exists(ctx, key)
	if err != nil {
		return storeErr(err, r, name)
	}
	if taken {
		return apierr.AlreadyExists(r, name)
	}
	return nil
}
