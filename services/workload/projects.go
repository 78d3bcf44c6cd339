package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// ProjectChecker reads the organisation: whether a project exists, which
// department it is in, the scheduling rules of both, and a department's
// projects (for policy conflicts). Projects and departments belong to the
// QuotaService; this service only asks.
type ProjectChecker interface {
	// ProjectExists returns nil if project (a resource name,
	// `projects/{project}`) exists, an apierr NotFound (PROJECT_NOT_FOUND)
	// if it does not, and any other error if it cannot tell.
	ProjectExists(ctx context.Context, project string) error
	// Project returns the project, or the same errors as ProjectExists.
	Project(ctx context.Context, project string) (*quotav1.Project, error)
	// Department returns the department `departments/{department}`, or an
	// apierr NotFound (DEPARTMENT_NOT_FOUND).
	Department(ctx context.Context, department string) (*quotav1.Department, error)
	// DepartmentProjects lists the names of a department's projects.
	DepartmentProjects(ctx context.Context, department string) ([]string, error)
	// Settings returns the account's general settings (settings.go).
	Settings(ctx context.Context) (*quotav1.Settings, error)
}

// QuotaProjects is the production ProjectChecker: the QuotaService through
// its generated client (in `runway dev`, a loopback connection; in
// `runway serve workload`, a connection to the quota service).
type QuotaProjects struct {
	Client quotav1.QuotaServiceClient
}

// ProjectExists asks QuotaService.GetProject.
func (q QuotaProjects) ProjectExists(ctx context.Context, project string) error {
	_, err := q.Project(ctx, project)
	return err
}

// Project asks QuotaService.GetProject. A NOT_FOUND answer becomes this
// service's PROJECT_NOT_FOUND (with the workload domain, since it is this
// API that reports it); any other failure passes through as the status the
// quota service sent, wrapped for the log.
func (q QuotaProjects) Project(ctx context.Context, project string) (*quotav1.Project, error) {
	p, err := q.Client.GetProject(ctx, &quotav1.GetProjectRequest{Name: project})
	return p, quotaErr(err, apierr.Project, project)
}

// Department asks QuotaService.GetDepartment.
func (q QuotaProjects) Department(ctx context.Context, department string) (*quotav1.Department, error) {
	d, err := q.Client.GetDepartment(ctx, &quotav1.GetDepartmentRequest{Name: department})
	return d, quotaErr(err, apierr.Department, department)
}

// DepartmentProjects pages through QuotaService.ListProjects filtered by
// department.
func (q QuotaProjects) DepartmentProjects(ctx context.Context, department string) ([]string, error) {
	var out []string
	req := &quotav1.ListProjectsRequest{Filter: fmt.Sprintf("department = %q", department), PageSize: 1000}
	for {
		resp, err := q.Client.ListProjects(ctx, req)
		if err != nil {
			return nil, quotaErr(err, apierr.Department, department)
		}
		for _, p := range resp.GetProjects() {
			out = append(out, p.GetName())
		}
		if resp.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// StoredProjects is the ProjectChecker of the service in production: it
// reads a project or a department where the quota service stores it (one
// etcd read, as current as GetProject's, which makes the same read),
// read-only, instead of asking over gRPC: CreateWorkload makes two calls
// fewer, each with its own authentication and encoding. Only the quota
// service writes these keys. A department's projects, a paged listing, are
// still asked of the quota service.
type StoredProjects struct {
	projects    *etcdstore.Collection[*quotav1.Project]
	departments *etcdstore.Collection[*quotav1.Department]
	settings    *etcdstore.Collection[*quotav1.Settings] // only settingsID
	quota       ProjectChecker
}

// NewStoredProjects reads projects, departments and the settings from
// client, and asks quota for a department's projects.
func NewStoredProjects(client *clientv3.Client, quota ProjectChecker) StoredProjects {
	return StoredProjects{
		projects:    etcdstore.NewCollection(client, etcdstore.PrefixProjects, func() *quotav1.Project { return new(quotav1.Project) }),
		departments: etcdstore.NewCollection(client, etcdstore.PrefixDepartments, func() *quotav1.Department { return new(quotav1.Department) }),
		settings:    etcdstore.NewCollection(client, etcdstore.Root, func() *quotav1.Settings { return new(quotav1.Settings) }),
		quota:       quota,
	}
}

// ProjectExists reads the project.
func (p StoredProjects) ProjectExists(ctx context.Context, project string) error {
	_, err := p.Project(ctx, project)
	return err
}

// Project reads `projects/{project}`: PROJECT_NOT_FOUND when it is not
// stored (or the name is not a project's).
func (p StoredProjects) Project(ctx context.Context, project string) (*quotav1.Project, error) {
	return readStored(ctx, p.projects, apierr.Project, project, projectsPrefix)
}

// Department reads `departments/{department}`: DEPARTMENT_NOT_FOUND when it
// is not stored.
func (p StoredProjects) Department(ctx context.Context, department string) (*quotav1.Department, error) {
	return readStored(ctx, p.departments, apierr.Department, department, "departments/")
}

// DepartmentProjects asks the quota service.
func (p StoredProjects) DepartmentProjects(ctx context.Context, department string) ([]string, error) {
	return p.quota.DepartmentProjects(ctx, department)
}

func readStored[T proto.Message](ctx context.Context, c *etcdstore.Collection[T], r apierr.Resource, name, prefix string) (T, error) {
	var zero T
	id, ok := strings.CutPrefix(name, prefix)
	if !ok || !validID(id) {
		return zero, apierr.NotFound(r, name)
	}
	it, err := c.Get(ctx, id)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return zero, apierr.NotFound(r, name).WithCause(err)
	}
	if err != nil {
		return zero, fmt.Errorf("read %s: %w", name, err)
	}
	return it.Msg, nil
}

func quotaErr(err error, r apierr.Resource, name string) error {
	switch {
	case err == nil:
		return nil
	case status.Code(err) == codes.NotFound:
		return apierr.NotFound(r, name).WithCause(err)
	default:
		return fmt.Errorf("ask the quota service for %s: %w", name, err)
	}
}
