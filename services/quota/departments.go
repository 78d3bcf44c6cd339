package quota

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// departmentKind is what the shared flow (resource.go) needs of departments.
var departmentKind = resourceKind[*quotav1.Department]{
	collection: departmentsCollection,
	field:      "department",
	idField:    "department_id",
	resource:   apierr.Department,
	fields:     departmentFields,
	items:      func(st *store) *etcdstore.Collection[*quotav1.Department] { return st.departments },
	fill:       fillDepartment,
	check: func(v *violations, field string, d *quotav1.Department, _ string) {
		v.checkDepartment(field, d)
	},
	prepare: (*Server).prepareDepartment,
	setters: func(ctx context.Context, before, after *quotav1.Department) error {
		return rulesSetters(ctx, "department.scheduling_rules", "departments.edit",
			before.GetSchedulingRules(), after.GetSchedulingRules(), "")
	},
	builtIn: func(name string) error {
		return apierr.FailedPrecondition(commonv1.ErrorReason_BUILT_IN_RESOURCE, name,
			"Department "+quote(name)+" is built in and holds every project that names no department; it cannot be deleted.")
	},
	inUse: (*Server).departmentInUse,
}

// GetDepartment returns one department.
func (s *Server) GetDepartment(ctx context.Context, req *quotav1.GetDepartmentRequest) (*quotav1.Department, error) {
	return departmentKind.get(ctx, s, req.GetName())
}

// ListDepartments returns a page of departments in name order.
func (s *Server) ListDepartments(ctx context.Context, req *quotav1.ListDepartmentsRequest) (*quotav1.ListDepartmentsResponse, error) {
	depts, next, err := departmentKind.list(ctx, s, req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &quotav1.ListDepartmentsResponse{Departments: depts, NextPageToken: next}, nil
}

// CreateDepartment stores a new department with its quota defaults filled in.
func (s *Server) CreateDepartment(ctx context.Context, req *quotav1.CreateDepartmentRequest) (*quotav1.Department, error) {
	return departmentKind.create(ctx, s, req.GetDepartmentId(), req.GetDepartment())
}

// UpdateDepartment changes the fields of update_mask.
func (s *Server) UpdateDepartment(ctx context.Context, req *quotav1.UpdateDepartmentRequest) (*quotav1.Department, error) {
	return departmentKind.update(ctx, s, req.GetDepartment(), req.GetUpdateMask())
}

// DeleteDepartment removes a department that holds no project.
func (s *Server) DeleteDepartment(ctx context.Context, req *quotav1.DeleteDepartmentRequest) (*emptypb.Empty, error) {
	return departmentKind.delete(ctx, s, req.GetName(), req.GetEtag())
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
	st, err := s.currentSettings(ctx, c)
	if err != nil || !st.GetRejectOverSubscription() {
		return err
	}
	projects, err := s.allProjects(ctx, c)
	if err != nil {
		return err
	}
	if err := checkDepartmentLoad(before, after, projects, projects); err != nil {
		return err
	}
	all, err := readAll(ctx, s.store.departments, c, apierr.Department)
	if err != nil {
		return err
	}
	capacity, err := s.store.capacities(ctx, pools)
	if err != nil {
		return storeErr(err, apierr.Node, "")
	}
	return checkPoolLoad(all, replaceNamed(all, after), capacity)
}

// departmentInUse fails while a project names the department, and guards c
// on the projects prefix so that a project created meanwhile is counted.
func (s *Server) departmentInUse(ctx context.Context, c *change, name, _ string) error {
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
	return nil
}

// allProjects reads every project and guards c on the projects prefix, so
// that the change commits only if no project was created or changed since.
func (s *Server) allProjects(ctx context.Context, c *change) ([]*quotav1.Project, error) {
	return readAll(ctx, s.store.projects, c, apierr.Project)
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
