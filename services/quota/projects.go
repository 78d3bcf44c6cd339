package quota

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// GetProject returns one project.
func (s *Server) GetProject(ctx context.Context, req *quotav1.GetProjectRequest) (*quotav1.Project, error) {
	id, err := parseName("name", req.GetName(), projectsCollection)
	if err != nil {
		return nil, err
	}
	it, err := s.store.projects.Get(ctx, id)
	if err != nil {
		return nil, storeErr(err, apierr.Project, req.GetName())
	}
	return fromItem(it), nil
}

// ListProjects returns a page of projects in name order, optionally of one
// department. With a filter a page may hold fewer than page_size projects
// (AIP-158 allows it): pages are cut from the full listing, then filtered;
// empty pages are skipped.
func (s *Server) ListProjects(ctx context.Context, req *quotav1.ListProjectsRequest) (*quotav1.ListProjectsResponse, error) {
	if err := checkPageSize(req.GetPageSize()); err != nil {
		return nil, err
	}
	dept, err := parseProjectFilter(req.GetFilter())
	if err != nil {
		return nil, err
	}
	resp := &quotav1.ListProjectsResponse{}
	token := req.GetPageToken()
	for {
		page, err := s.store.projects.List(ctx, "", int(req.GetPageSize()), token)
		if err != nil {
			return nil, storeErr(err, apierr.Project, "")
		}
		for _, it := range page.Items {
			if dept == "" || it.Msg.GetDepartment() == dept {
				resp.Projects = append(resp.Projects, fromItem(it))
			}
		}
		resp.NextPageToken, token = page.NextPageToken, page.NextPageToken
		if len(resp.Projects) > 0 || token == "" {
			return resp, nil
		}
	}
}

// CreateProject stores a new project in an existing department.
func (s *Server) CreateProject(ctx context.Context, req *quotav1.CreateProjectRequest) (*quotav1.Project, error) {
	var v violations
	v.checkID("project_id", req.GetProjectId())
	v.checkRequired("project", req.GetProject() == nil)
	id, now := req.GetProjectId(), s.timestamp()
	p := &quotav1.Project{}
	if req.GetProject() != nil {
		p = proto.Clone(req.GetProject()).(*quotav1.Project)
	}
	p.Name, p.Uid, p.CreateTime, p.UpdateTime, p.Etag = projectsCollection+"/"+id, newUID(), now, now, ""
	fillProject(p)
	if req.GetProject() != nil {
		v.checkProject("project", p)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	var out *quotav1.Project
	err := retry(p.GetName(), func() error {
		if err := s.absent(ctx, s.store.projects.Key(id), apierr.Project, p.GetName()); err != nil {
			return err
		}
		c := &change{}
		if err := s.prepareProject(ctx, c, p); err != nil {
			return err
		}
		c.put(s.store.projects.Key(id), p, 0)
		rev, err := s.store.commit(ctx, c)
		if err != nil {
			return storeErr(err, apierr.Project, p.GetName())
		}
		out = withEtag(proto.Clone(p).(*quotav1.Project), rev)
		return nil
	})
	return out, err
}

// UpdateProject changes the fields of update_mask.
func (s *Server) UpdateProject(ctx context.Context, req *quotav1.UpdateProjectRequest) (*quotav1.Project, error) {
	in := req.GetProject()
	var v violations
	v.checkRequired("project", in == nil)
	id := ""
	if in != nil {
		id = v.checkName("project.name", in.GetName(), projectsCollection)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	var out *quotav1.Project
	err := retry(in.GetName(), func() error {
		cur, err := s.store.projects.Get(ctx, id)
		if err != nil {
			return storeErr(err, apierr.Project, in.GetName())
		}
		if err := checkEtag(in.GetName(), in.GetEtag(), cur.Etag); err != nil {
			return err
		}
		paths, err := resolveMask(req.GetUpdateMask(), in, cur.Msg, projectFields)
		if err != nil {
			return err
		}
		next := proto.Clone(cur.Msg).(*quotav1.Project)
		applyMask(next, proto.Clone(in), paths)
		fillProject(next)
		var v violations
		if v.checkProject("project", next); len(v) > 0 {
			return v.err()
		}
		if unchanged(cur.Msg, next, cur.Msg.GetUpdateTime()) {
			out = fromItem(cur)
			return nil
		}
		next.UpdateTime = s.timestamp()
		c := &change{}
		if err := s.prepareProject(ctx, c, next); err != nil {
			return err
		}
		c.put(s.store.projects.Key(id), next, cur.Revision)
		rev, err := s.store.commit(ctx, c)
		if err != nil {
			return storeErr(err, apierr.Project, in.GetName())
		}
		out = withEtag(next, rev)
		return nil
	})
	return out, err
}

// prepareProject checks what a project write depends on besides its own
// fields, and conditions c on it: its department and the node pools it names
// exist, and, when over-subscription is rejected, the projects of its
// department do not deserve more than the department has.
func (s *Server) prepareProject(ctx context.Context, c *change, p *quotav1.Project) error {
	dept, err := s.store.departments.Get(ctx, clusterproto.ID(p.GetDepartment()))
	if err != nil {
		err = storeErr(err, apierr.Department, p.GetDepartment())
		if apierr.IsNotFound(err) {
			return apierr.NotFound(apierr.Department, p.GetDepartment()).InField("project.department")
		}
		return err
	}
	c.check(s.store.departments.Key(dept.ID), dept.Revision)
	var names, fields []string
	for i, q := range p.GetNodePoolQuotas() {
		names = append(names, q.GetNodePool())
		fields = append(fields, fmt.Sprintf("project.node_pool_quotas[%d].node_pool", i))
	}
	for i, pool := range p.GetDefaultNodePools() {
		names = append(names, pool)
		fields = append(fields, fmt.Sprintf("project.default_node_pools[%d]", i))
	}
	if _, err := s.poolRefs(ctx, c, names, fields); err != nil {
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
	return checkDepartmentLoad(dept.Msg, dept.Msg, projects, replaceProject(projects, p))
}

// DeleteProject removes a project that holds no workload.
func (s *Server) DeleteProject(ctx context.Context, req *quotav1.DeleteProjectRequest) (*emptypb.Empty, error) {
	name := req.GetName()
	id, err := parseName("name", name, projectsCollection)
	if err != nil {
		return nil, err
	}
	err = retry(name, func() error {
		cur, err := s.store.projects.Get(ctx, id)
		if err != nil {
			return storeErr(err, apierr.Project, name)
		}
		if err := checkEtag(name, req.GetEtag(), cur.Etag); err != nil {
			return err
		}
		workloads, rev, err := s.store.workloads.ListAll(ctx, id+"/")
		if err != nil {
			return storeErr(err, apierr.Workload, "")
		}
		if n := len(workloads); n > 0 {
			return apierr.FailedPrecondition(commonv1.ErrorReason_PROJECT_NOT_EMPTY, name,
				fmt.Sprintf("Project %q still has %d workloads; delete them first.", name, n)).
				With("workloadCount", strconv.Itoa(n))
		}
		c := &change{}
		c.unchangedSince(s.store.workloads.Key(id+"/"), rev)
		c.del(s.store.projects.Key(id), cur.Revision)
		_, err = s.store.commit(ctx, c)
		return storeErr(err, apierr.Project, name)
	})
	if err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// rejectOverSubscription reads Settings.reject_over_subscription. Settings
// missing (only before New's bootstrap ran) means the default, false.
func (s *Server) rejectOverSubscription(ctx context.Context) (bool, error) {
	it, err := s.store.settings.Get(ctx, settingsID)
	switch {
	case err == nil:
		return it.Msg.GetRejectOverSubscription(), nil
	case errors.Is(err, etcdstore.ErrNotFound):
		return false, nil
	}
	return false, settingsErr(err)
}
