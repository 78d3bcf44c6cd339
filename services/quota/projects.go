package quota

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// projectKind is what the shared flow (resource.go) needs of projects.
var projectKind = resourceKind[*quotav1.Project]{
	collection: projectsCollection,
	field:      "project",
	idField:    "project_id",
	resource:   apierr.Project,
	fields:     projectFields,
	items:      func(st *store) *etcdstore.Collection[*quotav1.Project] { return st.projects },
	fill:       fillProject,
	check: func(v *violations, field string, p *quotav1.Project, _ string) {
		v.checkProject(field, p)
	},
	prepare: (*Server).prepareProject,
	setters: func(ctx context.Context, before, after *quotav1.Project) error {
		return rulesSetters(ctx, "project.scheduling_rules", "projects.edit",
			before.GetSchedulingRules(), after.GetSchedulingRules(), before.GetDepartment())
	},
	inUse: (*Server).projectInUse,
}

// GetProject returns one project.
func (s *Server) GetProject(ctx context.Context, req *quotav1.GetProjectRequest) (*quotav1.Project, error) {
	return projectKind.get(ctx, s, req.GetName())
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
	return projectKind.create(ctx, s, req.GetProjectId(), req.GetProject())
}

// UpdateProject changes the fields of update_mask.
func (s *Server) UpdateProject(ctx context.Context, req *quotav1.UpdateProjectRequest) (*quotav1.Project, error) {
	return projectKind.update(ctx, s, req.GetProject(), req.GetUpdateMask())
}

// prepareProject checks what a project write depends on besides its own
// fields, and conditions c on it: its department and the node pools it names
// exist, and, when over-subscription is rejected, the projects of its
// department do not deserve more than the department has. The project as it
// was (before) does not matter: the check sums the stored projects. Default
// node pools left empty become the settings' default_node_pool.
func (s *Server) prepareProject(ctx context.Context, c *change, _, p *quotav1.Project) error {
	st, err := s.currentSettings(ctx, c)
	if err != nil {
		return err
	}
	if len(p.DefaultNodePools) == 0 {
		p.DefaultNodePools = []string{st.GetDefaultNodePool()}
	}
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
	if !st.GetRejectOverSubscription() {
		return nil
	}
	projects, err := s.allProjects(ctx, c)
	if err != nil {
		return err
	}
	return checkDepartmentLoad(dept.Msg, dept.Msg, projects, replaceNamed(projects, p))
}

// DeleteProject removes a project that holds no workload.
func (s *Server) DeleteProject(ctx context.Context, req *quotav1.DeleteProjectRequest) (*emptypb.Empty, error) {
	return projectKind.delete(ctx, s, req.GetName(), req.GetEtag())
}

// projectInUse fails while the project holds a workload, and guards c on the
// project's workloads so that one created meanwhile makes the delete retry.
func (s *Server) projectInUse(ctx context.Context, c *change, name, id string) error {
	workloads, rev, err := s.store.workloads.ListAll(ctx, id+"/")
	if err != nil {
		return storeErr(err, apierr.Workload, "")
	}
	if n := len(workloads); n > 0 {
		return apierr.FailedPrecondition(commonv1.ErrorReason_PROJECT_NOT_EMPTY, name,
			fmt.Sprintf("Project %q still has %d workloads; delete them first.", name, n)).
			With("workloadCount", strconv.Itoa(n))
	}
	c.unchangedSince(s.store.workloads.Key(id+"/"), rev)
	return nil
}
