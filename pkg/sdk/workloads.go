package sdk

import (
	"context"
	"iter"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// SubmitWorkload creates workload id in project.
func (c *Client) SubmitWorkload(ctx context.Context, project, id string, typ workloadv1.WorkloadType, spec *workloadv1.WorkloadSpec) (*workloadv1.Workload, error) {
	return c.WorkloadService.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{
		Parent: ProjectName(project), WorkloadId: id,
		Workload: &workloadv1.Workload{Type: typ, Spec: spec},
	})
}

// GetWorkload reads one workload.
func (c *Client) GetWorkload(ctx context.Context, project, id string) (*workloadv1.Workload, error) {
	return c.WorkloadService.GetWorkload(ctx, &workloadv1.GetWorkloadRequest{Name: WorkloadName(project, id)})
}

// DeleteWorkload stops a workload's pods and removes it.
func (c *Client) DeleteWorkload(ctx context.Context, project, id string) error {
	_, err := c.WorkloadService.DeleteWorkload(ctx, &workloadv1.DeleteWorkloadRequest{Name: WorkloadName(project, id)})
	return err
}

// SuspendWorkload releases what a workload holds and keeps it, STOPPED.
func (c *Client) SuspendWorkload(ctx context.Context, project, id string) (*workloadv1.Workload, error) {
	return c.WorkloadService.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: WorkloadName(project, id)})
}

// ResumeWorkload sends a suspended workload back to PENDING.
func (c *Client) ResumeWorkload(ctx context.Context, project, id string) (*workloadv1.Workload, error) {
	return c.WorkloadService.ResumeWorkload(ctx, &workloadv1.ResumeWorkloadRequest{Name: WorkloadName(project, id)})
}

// SetWorkloadPriority changes a workload's priority class.
func (c *Client) SetWorkloadPriority(ctx context.Context, project, id, priority string) (*workloadv1.Workload, error) {
	return c.WorkloadService.SetWorkloadPriority(ctx, &workloadv1.SetWorkloadPriorityRequest{Name: WorkloadName(project, id), Priority: priority})
}

// Workloads walks the workloads of project (AllProjects for every project
// the caller may see) that match filter (AIP-160, "" for all), by name.
func (c *Client) Workloads(ctx context.Context, project, filter string) iter.Seq2[*workloadv1.Workload, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*workloadv1.Workload], error) {
		r, err := c.WorkloadService.ListWorkloads(ctx, &workloadv1.ListWorkloadsRequest{
			Parent: ProjectName(project), Filter: filter, PageToken: token, PageSize: 1000})
		return Page[*workloadv1.Workload]{Items: r.GetWorkloads(), Next: r.GetNextPageToken()}, err
	})
}

// WatchWorkloads streams the workloads of project (AllProjects for all):
// first each existing one (ADDED), then SYNCED, then every change.
func (c *Client) WatchWorkloads(ctx context.Context, project, filter string) (workloadv1.WorkloadService_WatchWorkloadsClient, error) {
	return c.WorkloadService.WatchWorkloads(ctx, &workloadv1.WatchWorkloadsRequest{Parent: ProjectName(project), Filter: filter})
}
