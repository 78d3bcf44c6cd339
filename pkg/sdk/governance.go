package sdk

import (
	"context"
	"iter"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// Scope is where a policy, environment or compute resource lives: the
// account (Scope{}), a department or a project.
type Scope struct {
	Department, Project string
}

// Name is the scope's resource name: "" for the account,
// "departments/{department}" or "projects/{project}".
func (s Scope) Name() string {
	switch {
	case s.Project != "":
		return ProjectName(s.Project)
	case s.Department != "":
		return DepartmentName(s.Department)
	}
	return ""
}

// child is the name of id in collection at the scope.
func (s Scope) child(collection, id string) string {
	if n := s.Name(); n != "" {
		return n + "/" + collection + "/" + id
	}
	return collection + "/" + id
}

// PolicyName is the name of the policy for a workload type ("training") at
// the scope.
func (s Scope) PolicyName(typ string) string { return s.child("policies", typ) }

// EnvironmentName is the name of environment id at the scope.
func (s Scope) EnvironmentName(id string) string { return s.child("environments", id) }

// ComputeResourceName is the name of compute resource id at the scope.
func (s Scope) ComputeResourceName(id string) string { return s.child("computeResources", id) }

// TemplateName is the name of template id at the scope.
func (s Scope) TemplateName(id string) string { return s.child("templates", id) }

// GetPolicy reads the policy a scope sets for a workload type.
func (c *Client) GetPolicy(ctx context.Context, s Scope, typ string) (*workloadv1.Policy, error) {
	return c.GovernanceService.GetPolicy(ctx, &workloadv1.GetPolicyRequest{Name: s.PolicyName(typ)})
}

// SetPolicy sets (creates or replaces) the policy a scope sets for a
// workload type; p's name is set from them.
func (c *Client) SetPolicy(ctx context.Context, s Scope, typ string, p *workloadv1.Policy) (*workloadv1.Policy, error) {
	p.Name = s.PolicyName(typ)
	return c.GovernanceService.UpdatePolicy(ctx, &workloadv1.UpdatePolicyRequest{Policy: p, AllowMissing: true})
}

// DeletePolicy removes the policy a scope sets for a workload type.
func (c *Client) DeletePolicy(ctx context.Context, s Scope, typ string) error {
	_, err := c.GovernanceService.DeletePolicy(ctx, &workloadv1.DeletePolicyRequest{Name: s.PolicyName(typ)})
	return err
}

// EffectivePolicy is the policy in force for a project and workload type,
// each value with the policy it comes from.
func (c *Client) EffectivePolicy(ctx context.Context, project, typ string) (*workloadv1.EffectivePolicy, error) {
	return c.GovernanceService.GetEffectivePolicy(ctx, &workloadv1.GetEffectivePolicyRequest{
		Name: Scope{Project: project}.PolicyName(typ)})
}

// CreateEnvironment creates environment id at a scope.
func (c *Client) CreateEnvironment(ctx context.Context, s Scope, id string, e *workloadv1.Environment) (*workloadv1.Environment, error) {
	return c.GovernanceService.CreateEnvironment(ctx, &workloadv1.CreateEnvironmentRequest{Parent: s.Name(), EnvironmentId: id, Environment: e})
}

// DeleteEnvironment removes environment id of a scope.
func (c *Client) DeleteEnvironment(ctx context.Context, s Scope, id string) error {
	_, err := c.GovernanceService.DeleteEnvironment(ctx, &workloadv1.DeleteEnvironmentRequest{Name: s.EnvironmentName(id)})
	return err
}

// Environments walks the environments of a scope, by name.
func (c *Client) Environments(ctx context.Context, s Scope) iter.Seq2[*workloadv1.Environment, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*workloadv1.Environment], error) {
		r, err := c.GovernanceService.ListEnvironments(ctx, &workloadv1.ListEnvironmentsRequest{Parent: s.Name(), PageToken: token, PageSize: 1000})
		return Page[*workloadv1.Environment]{Items: r.GetEnvironments(), Next: r.GetNextPageToken()}, err
	})
}

// CreateComputeResource creates compute resource id at a scope.
func (c *Client) CreateComputeResource(ctx context.Context, s Scope, id string, r *workloadv1.ComputeResource) (*workloadv1.ComputeResource, error) {
	return c.GovernanceService.CreateComputeResource(ctx, &workloadv1.CreateComputeResourceRequest{Parent: s.Name(), ComputeResourceId: id, ComputeResource: r})
}

// DeleteComputeResource removes compute resource id of a scope.
func (c *Client) DeleteComputeResource(ctx context.Context, s Scope, id string) error {
	_, err := c.GovernanceService.DeleteComputeResource(ctx, &workloadv1.DeleteComputeResourceRequest{Name: s.ComputeResourceName(id)})
	return err
}

// ComputeResources walks the compute resources of a scope, by name.
func (c *Client) ComputeResources(ctx context.Context, s Scope) iter.Seq2[*workloadv1.ComputeResource, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*workloadv1.ComputeResource], error) {
		r, err := c.GovernanceService.ListComputeResources(ctx, &workloadv1.ListComputeResourcesRequest{Parent: s.Name(), PageToken: token, PageSize: 1000})
		return Page[*workloadv1.ComputeResource]{Items: r.GetComputeResources(), Next: r.GetNextPageToken()}, err
	})
}

// Assets are what a submission starts from, each an id or a full name (or
// ""): the server fills the fields the spec leaves unset from the template,
// then the environment and compute resource.
type Assets struct {
	Template, Environment, ComputeResource string
}

// SubmitWorkloadFrom is SubmitWorkload completed from assets: w's type,
// spec, labels and annotations are sent.
func (c *Client) SubmitWorkloadFrom(ctx context.Context, project, id string, w *workloadv1.Workload, a Assets) (*workloadv1.Workload, error) {
	return c.WorkloadService.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{
		Parent: ProjectName(project), WorkloadId: id, Template: a.Template, Environment: a.Environment,
		ComputeResource: a.ComputeResource, Workload: w,
	})
}

// CreateTemplate creates template id at a scope.
func (c *Client) CreateTemplate(ctx context.Context, s Scope, id string, t *workloadv1.Template) (*workloadv1.Template, error) {
	return c.GovernanceService.CreateTemplate(ctx, &workloadv1.CreateTemplateRequest{Parent: s.Name(), TemplateId: id, Template: t})
}

// GetTemplate reads template id of a scope.
func (c *Client) GetTemplate(ctx context.Context, s Scope, id string) (*workloadv1.Template, error) {
	return c.GovernanceService.GetTemplate(ctx, &workloadv1.GetTemplateRequest{Name: s.TemplateName(id)})
}

// RenameTemplate gives template id of a scope the id to.
func (c *Client) RenameTemplate(ctx context.Context, s Scope, id, to string) (*workloadv1.Template, error) {
	return c.GovernanceService.RenameTemplate(ctx, &workloadv1.RenameTemplateRequest{Name: s.TemplateName(id), NewTemplateId: to})
}

// DeleteTemplate removes template id of a scope.
func (c *Client) DeleteTemplate(ctx context.Context, s Scope, id string) error {
	_, err := c.GovernanceService.DeleteTemplate(ctx, &workloadv1.DeleteTemplateRequest{Name: s.TemplateName(id)})
	return err
}

// Templates walks the templates of a scope, by name.
func (c *Client) Templates(ctx context.Context, s Scope) iter.Seq2[*workloadv1.Template, error] {
	return All(ctx, func(ctx context.Context, token string) (Page[*workloadv1.Template], error) {
		r, err := c.GovernanceService.ListTemplates(ctx, &workloadv1.ListTemplatesRequest{Parent: s.Name(), PageToken: token, PageSize: 1000})
		return Page[*workloadv1.Template]{Items: r.GetTemplates(), Next: r.GetNextPageToken()}, err
	})
}

// SetProjectSchedulingRules replaces a project's scheduling rules.
func (c *Client) SetProjectSchedulingRules(ctx context.Context, project string, rules []*quotav1.SchedulingRules) (*quotav1.Project, error) {
	return c.QuotaService.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
		Project:    &quotav1.Project{Name: ProjectName(project), SchedulingRules: rules},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"scheduling_rules"}},
	})
}

// SetDepartmentSchedulingRules replaces a department's scheduling rules.
func (c *Client) SetDepartmentSchedulingRules(ctx context.Context, department string, rules []*quotav1.SchedulingRules) (*quotav1.Department, error) {
	return c.QuotaService.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{
		Department: &quotav1.Department{Name: DepartmentName(department), SchedulingRules: rules},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"scheduling_rules"}},
	})
}

// GetDepartment reads one department.
func (c *Client) GetDepartment(ctx context.Context, department string) (*quotav1.Department, error) {
	return c.QuotaService.GetDepartment(ctx, &quotav1.GetDepartmentRequest{Name: DepartmentName(department)})
}
