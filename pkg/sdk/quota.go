package sdk

import (
	"context"
	"iter"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
)

// GetProject reads one project.
func (c *Client) GetProject(ctx context.Context, project string) (*quotav1.Project, error) {
	return c.QuotaService.GetProject(ctx, &quotav1.GetProjectRequest{Name: ProjectName(project)})
}

// CreateProject creates project id from p (its name is ignored).
func (c *Client) CreateProject(ctx context.Context, id string, p *quotav1.Project) (*quotav1.Project, error) {
	return c.QuotaService.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: id, Project: p})
}

// DeleteProject deletes a project that holds no workloads.
func (c *Client) DeleteProject(ctx context.Context, project string) error {
	_, err := c.QuotaService.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: ProjectName(project)})
	return err
}

// Projects walks every project, by name.
func (c *Client) Projects(ctx context.Context) iter.Seq2[*quotav1.Project, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*quotav1.Project], error) {
		r, err := c.QuotaService.ListProjects(ctx, &quotav1.ListProjectsRequest{PageToken: token, PageSize: 1000})
		return Page[*quotav1.Project]{Items: r.GetProjects(), Next: r.GetNextPageToken()}, err
	})
}

// Departments walks every department, by name.
func (c *Client) Departments(ctx context.Context) iter.Seq2[*quotav1.Department, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*quotav1.Department], error) {
		r, err := c.QuotaService.ListDepartments(ctx, &quotav1.ListDepartmentsRequest{PageToken: token, PageSize: 1000})
		return Page[*quotav1.Department]{Items: r.GetDepartments(), Next: r.GetNextPageToken()}, err
	})
}

// NodePools walks every node pool, by name.
func (c *Client) NodePools(ctx context.Context) iter.Seq2[*quotav1.NodePool, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*quotav1.NodePool], error) {
		r, err := c.QuotaService.ListNodePools(ctx, &quotav1.ListNodePoolsRequest{PageToken: token, PageSize: 1000})
		return Page[*quotav1.NodePool]{Items: r.GetNodePools(), Next: r.GetNextPageToken()}, err
	})
}

// Queues walks the scheduler's queues (projects and departments with their
// fair share and allocation per node pool), by name.
func (c *Client) Queues(ctx context.Context, filter string) iter.Seq2[*schedulerv1.Queue, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*schedulerv1.Queue], error) {
		r, err := c.SchedulerService.ListQueues(ctx, &schedulerv1.ListQueuesRequest{Filter: filter, PageToken: token, PageSize: 1000})
		return Page[*schedulerv1.Queue]{Items: r.GetQueues(), Next: r.GetNextPageToken()}, err
	})
}
