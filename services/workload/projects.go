package workload

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
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
