package workload

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// ProjectChecker tells whether a project exists. Projects belong to the
// QuotaService; this service only asks.
type ProjectChecker interface {
	// ProjectExists returns nil if project (a resource name,
	// `projects/{project}`) exists, an apierr NotFound (PROJECT_NOT_FOUND)
	// if it does not, and any other error if it cannot tell.
	ProjectExists(ctx context.Context, project string) error
}

// QuotaProjects is the production ProjectChecker: QuotaService.GetProject
// through its generated client (in `runway dev`, a loopback connection; in
// `runway serve workload`, a connection to the quota service).
type QuotaProjects struct {
	Client quotav1.QuotaServiceClient
}

// ProjectExists asks QuotaService.GetProject. A NOT_FOUND answer becomes
// this service's PROJECT_NOT_FOUND (with the workload domain, since it is
// this API that reports it); any other failure passes through as the status
// the quota service sent, wrapped for the log.
func (q QuotaProjects) ProjectExists(ctx context.Context, project string) error {
	_, err := q.Client.GetProject(ctx, &quotav1.GetProjectRequest{Name: project})
	switch {
	case err == nil:
		return nil
	case status.Code(err) == codes.NotFound:
		return apierr.NotFound(apierr.Project, project).WithCause(err)
	default:
		return fmt.Errorf("ask the quota service for %s: %w", project, err)
	}
}
