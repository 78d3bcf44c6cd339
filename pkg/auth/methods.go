package auth

import (
	"context"
	"strings"

	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Access is who may call a method at all.
type Access int

// The kinds of access.
const (
	Checked       Access = iota // a token and the declared permission on the target
	Authenticated               // any valid token (ListRoles, GetCaller)
	Public                      // no token (Login, health, reflection)
	// NodeAgentOnly: a node agent's token (which holds no permission at
	// all), and Check decides what it may do on its own node.
	NodeAgentOnly
)

// Method is one RPC's declaration: the permission it needs and the target it
// touches. The interceptor refuses a method that has none.
type Method struct {
	Access Access
	Perm   Permission
	// Target is where the call acts; it may read the guard's mirrors.
	Target func(g *Guard, req any) Target
	// Attrs loads what conditional grants look at (the stored resource's
	// creator and type); nil when the method has no conditional grant.
	Attrs func(ctx context.Context, g *Guard, c Caller, req any) (Attrs, error)
	// Check is what the call needs beyond the permission on its target (no
	// escalation through access rules, quotas set from above); nil when
	// nothing.
	Check func(ctx context.Context, g *Guard, c Caller, req any) error
	// Filter drops from a List response the items the caller may not view.
	Filter func(g *Guard, resp any, keep keep)
	// Redact hides, in the response, the names of workloads the caller may
	// not view (redact.go): for views of the cluster that mention workloads.
	Redact bool
	// Keep decides whether a streamed message may be sent (Watch).
	Keep func(g *Guard, msg any, keep keep) bool
	// Tokens are the token types the method accepts; none means API
	// tokens (access, service) only.
	Tokens []TokenType
	// NewRequest makes an empty request of a server-streaming method, which
	// the interceptor receives itself to decide.
	NewRequest func() proto.Message
	// Audit: calls are audited although the permission is a view (a change
	// that is the caller's own, as a notification subscription).
	Audit bool
}

// Mutating reports whether calls to m are audited.
func (m Method) Mutating() bool {
	return m.Access == Checked && (m.Perm.Action != View || m.Audit) || m.Access == NodeAgentOnly
}

// Methods returns the declaration of every RPC, by full method name.
func Methods() map[string]Method { return methods }

// allChecks is a Check made of checks, each of which must pass.
func allChecks(checks ...func(context.Context, *Guard, Caller, any) error) func(context.Context, *Guard, Caller, any) error {
	return func(ctx context.Context, g *Guard, c Caller, req any) error {
		for _, check := range checks {
			if err := check(ctx, g, c, req); err != nil {
				return err
			}
		}
		return nil
	}
}

func named(req any) string { return req.(interface{ GetName() string }).GetName() }

// projectOf is the project part of a name inside a project
// ("projects/a/workloads/w" → "projects/a").
func projectOf(name string) string {
	parts := strings.SplitN(name, "/", 3)
	if len(parts) < 2 || parts[0] != "projects" {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

func account(resource string) Target  { return Target{Level: AccountLevel, Resource: resource} }
func anywhere(resource string) Target { return Target{Level: Anywhere, Resource: resource} }

// inProject: the target is the project of the request's name.
func inProject(g *Guard, req any) Target {
	n := named(req)
	return g.ProjectTarget(projectOf(n), n)
}

// queueTarget: projects/{p}/queue is in p; departments/{d}/queue is in d.
func (g *Guard) queueTarget(name string) Target {
	if strings.HasPrefix(name, "departments/") {
		d, _, _ := strings.Cut(strings.TrimPrefix(name, "departments/"), "/")
		return Target{Level: DepartmentLevel, Department: "departments/" + d, Resource: name}
	}
	return g.ProjectTarget(projectOf(name), name)
}

func departmentTarget(name string) Target {
	return Target{Level: DepartmentLevel, Department: name, Resource: name}
}

// ruleTarget is where an access rule applies.
func (g *Guard) ruleTarget(r *identityv1.AccessRule) Target {
	s := r.GetScope()
	switch s.GetKind() {
	case identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT:
		return Target{Level: DepartmentLevel, Department: s.GetName(), Resource: r.GetName()}
	case identityv1.ScopeKind_SCOPE_KIND_PROJECT:
		t := g.ProjectTarget(s.GetName(), r.GetName())
		return t
	}
	return account(r.GetName())
}

// listParent is the target of a List or Watch: one project, or with
// `projects/-` anywhere (the results are filtered).
func listParent(g *Guard, parent string) Target {
	if parent == "" || parent == "projects/-" {
		return anywhere(parent)
	}
	return g.ProjectTarget(parent, parent)
}

func workloadAttrs(w *workloadv1.Workload) Attrs {
	return Attrs{Creator: w.GetCreator(), CreatorUID: w.GetCreatorUid(), Inference: w.GetType() == workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE}
}

// storedWorkload reads a workload's creator and type from etcd: only for
// callers whose grant depends on them (the L1 researcher, the ML engineer).
func storedWorkload(ctx context.Context, g *Guard, _ Caller, req any) (Attrs, error) {
	name := named(req)
	id := strings.TrimPrefix(strings.Replace(name, "/workloads/", "/", 1), "projects/")
	resp, err := g.client.Get(ctx, etcdstore.PrefixWorkloads+id)
	if err != nil || len(resp.Kvs) == 0 {
		return Attrs{}, err
	}
	w := &workloadv1.Workload{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, w); err != nil {
		return Attrs{}, err
	}
	return workloadAttrs(w), nil
}

// storedApplication: only a user application has an owner in the sense of
// the Own grant, and only while its creator is the user who made it; an
// application managed under Access is administered by those who hold
// applications.* outright.
func storedApplication(_ context.Context, g *Guard, _ Caller, req any) (Attrs, error) {
	a, ok := g.apps.get(strings.TrimPrefix(named(req), "applications/"))
	if !ok || !userApplication(a.GetApplication()) || !g.creatorCurrent(a) {
		return Attrs{}, nil
	}
	return Attrs{Creator: a.GetApplication().GetCreator()}, nil
}

// applicationAttrs is a listed application's owner, as storedApplication.
func (g *Guard) applicationAttrs(a *identityv1.Application) Attrs {
	st, ok := g.apps.get(strings.TrimPrefix(a.GetName(), "applications/"))
	if !ok || !userApplication(a) || !g.creatorCurrent(st) {
		return Attrs{}
	}
	return Attrs{Creator: a.GetCreator()}
}

func filterSlice[T any](items []T, ok func(T) bool) []T {
	out := items[:0]
	for _, it := range items {
		if ok(it) {
			out = append(out, it)
		}
	}
	return out
}

const (
	quotaSvc    = "/runway.quota.v1.QuotaService/"
	workloadSvc = "/runway.workload.v1.WorkloadService/"
	govSvc      = "/runway.workload.v1.GovernanceService/"
	credSvc     = "/runway.workload.v1.CredentialService/"
	dsSvc       = "/runway.workload.v1.DataSourceService/"
	toolSvc     = "/runway.workload.v1.ToolService/"
	schedSvc    = "/runway.scheduler.v1.SchedulerService/"
	nodeSvc     = "/runway.nodemanager.v1.NodeManagerService/"
	agentSvc    = "/runway.nodemanager.v1.NodeAgentService/"
	identitySvc = "/runway.identity.v1.IdentityService/"
)

func perm(e Entity, a Action) Permission { return Permission{e, a} }

// governedTarget is where a policy or an asset (environment, compute
// resource) acts: the project or department its name or parent starts
// with, else the account.
func (g *Guard) governedTarget(name string) Target {
	switch {
	case strings.HasPrefix(name, "projects/"):
		return g.ProjectTarget(projectOf(name), name)
	case strings.HasPrefix(name, "departments/"):
		d, _, _ := strings.Cut(strings.TrimPrefix(name, "departments/"), "/")
		return Target{Level: DepartmentLevel, Department: "departments/" + d, Resource: name}
	}
	return account(name)
}

// governedView: policies and assets are seen where they may be used. The
// account's shape every submit, so anyone who may view policies somewhere
// sees them; a department's shape its projects' submits and are seen from
// the department and its projects, not from another department; a
// project's are seen in that project.
func (g *Guard) governedView(name string) Target {
	switch {
	case strings.HasPrefix(name, "projects/"):
		return g.governedTarget(name)
	case strings.HasPrefix(name, "departments/"):
		t := g.governedTarget(name)
		t.Level = InDepartment
		return t
	}
	return anywhere(name)
}

// governed declares a method on a policy or asset named by the request's
// name (or, with parent, its parent scope).
func governed(e Entity, a Action, scopeOf func(req any) string) Method {
	if a == View {
		return Method{Perm: perm(e, a), Target: func(g *Guard, r any) Target { return g.governedView(scopeOf(r)) }}
	}
	return Method{Perm: perm(e, a), Target: func(g *Guard, r any) Target { return g.governedTarget(scopeOf(r)) }}
}

// checked is m with the extra check c.
func checked(m Method, c func(ctx context.Context, g *Guard, c Caller, req any) error) Method {
	m.Check = c
	return m
}

func parentOf(req any) string { return req.(interface{ GetParent() string }).GetParent() }

var methods = map[string]Method{
	// Policies and assets (environments, compute resources, templates): the Policies
	// entity of the role table.
	govSvc + "GetPolicy": governed(Policies, View, named),
	// Every scope's policies, each kept only where the caller may view it
	// (governedView: the account's anywhere, a department's from it and its
	// projects, a project's in it).
	govSvc + "ListPolicies": {Perm: perm(Policies, View), Target: func(*Guard, any) Target { return anywhere("policies") },
		Filter: func(g *Guard, resp any, ok keep) {
			r := resp.(*workloadv1.ListPoliciesResponse)
			r.Policies = filterSlice(r.Policies, func(p *workloadv1.Policy) bool { return ok(g.governedView(p.GetName()), Attrs{}) })
		}},
	govSvc + "UpdatePolicy": governed(Policies, Edit, func(r any) string {
		return r.(*workloadv1.UpdatePolicyRequest).GetPolicy().GetName()
	}),
	govSvc + "DeletePolicy":          governed(Policies, Delete, named),
	govSvc + "GetEffectivePolicy":    governed(Policies, View, named),
	govSvc + "CreateEnvironment":     governed(Policies, Create, parentOf),
	govSvc + "GetEnvironment":        governed(Policies, View, named),
	govSvc + "ListEnvironments":      governed(Policies, View, parentOf),
	govSvc + "DeleteEnvironment":     governed(Policies, Delete, named),
	govSvc + "CreateComputeResource": governed(Policies, Create, parentOf),
	govSvc + "GetComputeResource":    governed(Policies, View, named),
	govSvc + "ListComputeResources":  governed(Policies, View, parentOf),
	govSvc + "DeleteComputeResource": governed(Policies, Delete, named),
	// Credentials are assets too: created, viewed (keys, never values) and
	// used where environments are. Re-encryption is the account's; values
	// are opened only for a node agent, for pods bound to its node.
	// A credential's audit event names it (not only its scope): that it
	// changed is recorded, never its values.
	credSvc + "CreateCredential": {Perm: perm(Policies, Create), Target: func(g *Guard, r any) Target {
		req := r.(*workloadv1.CreateCredentialRequest)
		t := g.governedTarget(req.GetParent())
		t.Resource = strings.TrimPrefix(req.GetParent()+"/credentials/"+req.GetCredentialId(), "/")
		return t
	}},
	credSvc + "GetCredential":        governed(Policies, View, named),
	credSvc + "ListCredentials":      governed(Policies, View, parentOf),
	credSvc + "DeleteCredential":     governed(Policies, Delete, named),
	credSvc + "ReencryptCredentials": {Perm: perm(Policies, Edit), Target: func(*Guard, any) Target { return account("credentials") }},
	credSvc + "ResolvePodCredentials": {Access: NodeAgentOnly, Perm: perm(Nodes, Edit), Check: checkNodeAgent,
		Target: func(_ *Guard, r any) Target {
			return account(r.(*workloadv1.ResolvePodCredentialsRequest).GetWorkload())
		}},
	govSvc + "CreateTemplate": checked(governed(Policies, Create, parentOf), checkCreateTemplate),
	govSvc + "GetTemplate":    governed(Policies, View, named),
	govSvc + "ListTemplates":  governed(Policies, View, parentOf),
	govSvc + "DeleteTemplate": governed(Policies, Delete, named),
	govSvc + "RenameTemplate": governed(Policies, Edit, named),
	// Data sources are assets like environments; host-path ones are an
	// account administrator's to create or change (datasources.go).
	dsSvc + "CreateDataSource": checked(governed(Policies, Create, parentOf), checkCreateDataSource),
	dsSvc + "GetDataSource":    governed(Policies, View, named),
	dsSvc + "ListDataSources":  governed(Policies, View, parentOf),
	dsSvc + "UpdateDataSource": checked(governed(Policies, Edit, func(r any) string {
		return r.(*workloadv1.UpdateDataSourceRequest).GetDataSource().GetName()
	}), checkUpdateDataSource),
	dsSvc + "DeleteDataSource": governed(Policies, Delete, named),
	// gRPC's own services: probes and grpcurl.
	"/grpc.health.v1.Health/Check":                                   {Access: Public},
	"/grpc.health.v1.Health/List":                                    {Access: Public},
	"/grpc.health.v1.Health/Watch":                                   {Access: Public},
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      {Access: Public},
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": {Access: Public},

	// Quota: node pools and settings are the account's; departments and
	// projects are scopes themselves.
	quotaSvc + "GetNodePool":   {Perm: perm(NodePools, View), Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
	quotaSvc + "ListNodePools": {Perm: perm(NodePools, View), Target: func(*Guard, any) Target { return anywhere("nodepools") }},
	quotaSvc + "CreateNodePool": {Perm: perm(NodePools, Create), Target: func(_ *Guard, r any) Target {
		return account("nodepools/" + r.(*quotav1.CreateNodePoolRequest).GetNodePoolId())
	}},
	quotaSvc + "UpdateNodePool": {Perm: perm(NodePools, Edit), Target: func(_ *Guard, r any) Target {
		return account(r.(*quotav1.UpdateNodePoolRequest).GetNodePool().GetName())
	}},
	quotaSvc + "DeleteNodePool": {Perm: perm(NodePools, Delete), Target: func(_ *Guard, r any) Target { return account(named(r)) }},
	quotaSvc + "GetDepartment":  {Perm: perm(Departments, View), Target: func(_ *Guard, r any) Target { return departmentTarget(named(r)) }},
	quotaSvc + "ListDepartments": {Perm: perm(Departments, View), Target: func(*Guard, any) Target { return anywhere("departments") },
		Filter: func(_ *Guard, resp any, ok keep) {
			r := resp.(*quotav1.ListDepartmentsResponse)
			r.Departments = filterSlice(r.Departments, func(d *quotav1.Department) bool {
				return ok(departmentTarget(d.GetName()), Attrs{})
			})
		}},
	quotaSvc + "CreateDepartment": {Perm: perm(Departments, Create), Target: func(_ *Guard, r any) Target {
		return account("departments/" + r.(*quotav1.CreateDepartmentRequest).GetDepartmentId())
	}},
	quotaSvc + "UpdateDepartment": {Perm: perm(Departments, Edit), Check: checkDepartmentQuota, Target: func(_ *Guard, r any) Target {
		return departmentTarget(r.(*quotav1.UpdateDepartmentRequest).GetDepartment().GetName())
	}},
	quotaSvc + "DeleteDepartment": {Perm: perm(Departments, Delete), Target: func(_ *Guard, r any) Target { return account(named(r)) }},
	quotaSvc + "GetProject":       {Perm: perm(Projects, View), Target: func(g *Guard, r any) Target { return g.ProjectTarget(named(r), named(r)) }},
	quotaSvc + "ListProjects": {Perm: perm(Projects, View), Target: func(*Guard, any) Target { return anywhere("projects") },
		Filter: func(g *Guard, resp any, ok keep) {
			r := resp.(*quotav1.ListProjectsResponse)
			r.Projects = filterSlice(r.Projects, func(p *quotav1.Project) bool {
				return ok(g.ProjectTarget(p.GetName(), p.GetName()), Attrs{})
			})
		}},
	// A new project is created in its department.
	quotaSvc + "CreateProject": {Perm: perm(Projects, Create), Target: func(_ *Guard, r any) Target {
		req := r.(*quotav1.CreateProjectRequest)
		d := req.GetProject().GetDepartment()
		if d == "" {
			d = "departments/default"
		}
		return Target{Level: DepartmentLevel, Department: d, Resource: "projects/" + req.GetProjectId()}
	}},
	quotaSvc + "UpdateProject": {Perm: perm(Projects, Edit), Check: checkProjectMove, Target: func(g *Guard, r any) Target {
		n := r.(*quotav1.UpdateProjectRequest).GetProject().GetName()
		return g.ProjectTarget(n, n)
	}},
	quotaSvc + "DeleteProject":  {Perm: perm(Projects, Delete), Target: func(g *Guard, r any) Target { return g.ProjectTarget(named(r), named(r)) }},
	quotaSvc + "GetSettings":    {Perm: perm(Settings, View), Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
	quotaSvc + "UpdateSettings": {Perm: perm(Settings, Edit), Target: func(_ *Guard, r any) Target { return account("settings") }},
	// The sign-in page shows the banner before anyone signs in; it is the
	// settings' only field served without a token.
	quotaSvc + "GetLoginBanner": {Access: Public},

	// Workloads live in projects. A researcher's delete or suspend of
	// someone else's workload needs more than the Own grant.
	workloadSvc + "CreateWorkload": {Perm: perm(Workloads, Create), Check: allChecks(checkCreateWorkload, checkPublicServing),
		Target: func(g *Guard, r any) Target {
			req := r.(*workloadv1.CreateWorkloadRequest)
			return g.ProjectTarget(req.GetParent(), req.GetParent()+"/workloads/"+req.GetWorkloadId())
		},
		Attrs: func(_ context.Context, _ *Guard, c Caller, r any) (Attrs, error) {
			return Attrs{Creator: c.Principal, CreatorUID: c.UserUID,
				Inference: r.(*workloadv1.CreateWorkloadRequest).GetWorkload().GetType() == workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE}, nil
		}},
	workloadSvc + "GetWorkload": {Perm: perm(Workloads, View), Target: inProject},
	workloadSvc + "ListWorkloads": {Perm: perm(Workloads, View),
		Target: func(g *Guard, r any) Target { return listParent(g, r.(*workloadv1.ListWorkloadsRequest).GetParent()) },
		Filter: func(g *Guard, resp any, ok keep) {
			r := resp.(*workloadv1.ListWorkloadsResponse)
			r.Workloads = filterSlice(r.Workloads, func(w *workloadv1.Workload) bool {
				return ok(g.ProjectTarget(w.GetProject(), w.GetName()), workloadAttrs(w))
			})
		}},
	workloadSvc + "DeleteWorkload":  {Perm: perm(Workloads, Delete), Target: inProject, Attrs: storedWorkload},
	workloadSvc + "SuspendWorkload": {Perm: perm(Workloads, Edit), Target: inProject, Attrs: storedWorkload},
	workloadSvc + "ResumeWorkload":  {Perm: perm(Workloads, Edit), Target: inProject, Attrs: storedWorkload},
	// A new priority is an edit of the workload: who may suspend it may
	// reorder it (within the classes its type allows at submit).
	workloadSvc + "SetWorkloadPriority": {Perm: perm(Workloads, Edit), Target: inProject, Attrs: storedWorkload},
	workloadSvc + "WatchWorkloads": {Perm: perm(Workloads, View),
		NewRequest: func() proto.Message { return new(workloadv1.WatchWorkloadsRequest) },
		Target:     func(g *Guard, r any) Target { return listParent(g, r.(*workloadv1.WatchWorkloadsRequest).GetParent()) },
		Keep: func(g *Guard, msg any, ok keep) bool {
			w := msg.(*workloadv1.WatchWorkloadsResponse).GetWorkload()
			return w == nil || ok(g.ProjectTarget(w.GetProject(), w.GetName()), workloadAttrs(w))
		}},

	// A workload's tools are reached by whoever may view it: the proxy asks
	// with the caller's own credential, an API token or a tool session
	// bound to that workload (tools.go), and exchanges a ticket bound to it.
	toolSvc + "CreateToolTicket":   {Perm: perm(Workloads, View), Target: inProject},
	toolSvc + "ExchangeToolTicket": {Perm: perm(Workloads, View), Target: inProject, Tokens: []TokenType{ToolTicketToken}},
	toolSvc + "ResolveTool": {Perm: perm(Workloads, View), Target: inProject,
		Tokens: []TokenType{AccessToken, ToolSessionToken}},
	// An inference endpoint's access is its workload's (public, any token,
	// or view on its project): the handler authorises (Guard.Authenticate,
	// MayViewWorkload).
	toolSvc + "ResolveEndpoint": {Access: Public},

	workloadSvc + "ReadWorkloadLogs": {Perm: perm(Workloads, View), Target: inProject,
		NewRequest: func() proto.Message { return new(workloadv1.ReadWorkloadLogsRequest) }},
	// A node agent serves pod output only to the workload service (a service
	// token) and to whoever may view the workload.
	agentSvc + "ReadPodLogs": {Perm: perm(Workloads, View),
		Target: func(g *Guard, r any) Target {
			w := r.(*nodemanagerv1.ReadPodLogsRequest).GetWorkload()
			return g.ProjectTarget(projectOf(w), w)
		},
		NewRequest: func() proto.Message { return new(nodemanagerv1.ReadPodLogsRequest) }},

	// The scheduler's views are about projects and departments; who leads is
	// the cluster's, like nodes.
	schedSvc + "GetQueue": {Perm: perm(Workloads, View), Target: func(g *Guard, r any) Target { return g.queueTarget(named(r)) }},
	schedSvc + "ListQueues": {Perm: perm(Workloads, View), Target: func(*Guard, any) Target { return anywhere("queues") },
		Filter: func(g *Guard, resp any, ok keep) {
			r := resp.(*schedulerv1.ListQueuesResponse)
			r.Queues = filterSlice(r.Queues, func(q *schedulerv1.Queue) bool { return ok(g.queueTarget(q.GetName()), Attrs{}) })
		}},
	schedSvc + "ExplainWorkload": {Perm: perm(Workloads, View), Target: inProject, Redact: true},
	schedSvc + "GetLeader":       {Perm: perm(Nodes, View), Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},

	// Nodes are the cluster's: anyone with a role sees them, only the
	// account's administrators (and the control plane) change them.
	nodeSvc + "GetNode":      {Perm: perm(Nodes, View), Redact: true, Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
	nodeSvc + "ListNodes":    {Perm: perm(Nodes, View), Redact: true, Target: func(*Guard, any) Target { return anywhere("nodes") }},
	nodeSvc + "DrainNode":    {Perm: perm(Nodes, Edit), Target: func(_ *Guard, r any) Target { return account(named(r)) }},
	nodeSvc + "UndrainNode":  {Perm: perm(Nodes, Edit), Target: func(_ *Guard, r any) Target { return account(named(r)) }},
	nodeSvc + "SetNodeRoles": {Perm: perm(Nodes, Edit), Target: func(_ *Guard, r any) Target { return account(named(r)) }},
	nodeSvc + "ReportWorkloadState": {Perm: perm(Nodes, Edit), Target: func(_ *Guard, r any) Target {
		return account(r.(*nodemanagerv1.ReportWorkloadStateRequest).GetNode())
	}},
	nodeSvc + "GetTimeSlicePlan": {Perm: perm(Nodes, View), Redact: true, Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
	// A node agent in Kubernetes mode holds no Runway token: the handler
	// reviews its Kubernetes service account token (kube.NodeKeys).
	nodeSvc + "GetNodeMarkKey": {Access: Public},
	// The caller proves which node's agent it is with its Kubernetes
	// service account token, which the service reviews (as above).
	nodeSvc + "IssueNodeAgentToken": {Access: Public},
	// A node agent's token opens the credentials of its node's pods: only
	// who may edit nodes account-wide mints one.
	nodeSvc + "CreateNodeAgentToken": {Perm: perm(Nodes, Edit), Target: func(_ *Guard, r any) Target {
		return account(r.(*nodemanagerv1.CreateNodeAgentTokenRequest).GetNode())
	}},

	// Identity.
	identitySvc + "Login":            {Access: Public},
	identitySvc + "GetSignInOptions": {Access: Public},
	identitySvc + "ListRoles":        {Access: Authenticated},
	identitySvc + "GetCaller":        {Access: Authenticated},
	identitySvc + "Logout":           {Access: Authenticated},
	identitySvc + "CreateUser": {Perm: perm(Users, Create), Target: func(_ *Guard, r any) Target {
		return account("users/" + r.(*identityv1.CreateUserRequest).GetUserId())
	}},
	identitySvc + "GetUser":           {Perm: perm(Users, View), Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
	identitySvc + "ListUsers":         {Perm: perm(Users, View), Target: func(*Guard, any) Target { return anywhere("users") }},
	identitySvc + "DeleteUser":        {Perm: perm(Users, Delete), Target: func(_ *Guard, r any) Target { return account(named(r)) }},
	identitySvc + "ResetUserPassword": {Perm: perm(Users, Edit), Target: func(_ *Guard, r any) Target { return account(named(r)) }},
	// Applications are personal: a user's own, or any for an administrator.
	// A user application is anyone's own; one managed under Access is the
	// account's.
	identitySvc + "CreateApplication": {Perm: perm(Applications, Create),
		Target: func(_ *Guard, r any) Target {
			req := r.(*identityv1.CreateApplicationRequest)
			name := "applications/" + req.GetApplicationId()
			if req.GetApplication().GetKind() == identityv1.ApplicationKind_APPLICATION_KIND_MANAGED {
				return account(name)
			}
			return anywhere(name)
		},
		Attrs: func(_ context.Context, _ *Guard, c Caller, r any) (Attrs, error) {
			if r.(*identityv1.CreateApplicationRequest).GetApplication().GetKind() == identityv1.ApplicationKind_APPLICATION_KIND_MANAGED {
				return Attrs{}, nil
			}
			return Attrs{Creator: c.Principal}, nil
		}},
	identitySvc + "GetApplication": {Perm: perm(Applications, View), Attrs: storedApplication,
		Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
	identitySvc + "ListApplications": {Perm: perm(Applications, View), Target: func(*Guard, any) Target { return anywhere("applications") },
		Filter: func(g *Guard, resp any, ok keep) {
			r := resp.(*identityv1.ListApplicationsResponse)
			r.Applications = filterSlice(r.Applications, func(a *identityv1.Application) bool {
				return ok(anywhere(a.GetName()), g.applicationAttrs(a))
			})
		}},
	identitySvc + "DeleteApplication": {Perm: perm(Applications, Delete), Attrs: storedApplication,
		Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
	identitySvc + "RegenerateApplicationSecret": {Perm: perm(Applications, Edit), Attrs: storedApplication,
		Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
	// Access rules act in their scope: a department's administrator grants
	// roles in the department.
	identitySvc + "CreateAccessRule": {Perm: perm(AccessRules, Create), Check: checkGrant, Target: func(g *Guard, r any) Target {
		return g.ruleTarget(r.(*identityv1.CreateAccessRuleRequest).GetAccessRule())
	}},
	identitySvc + "GetAccessRule":    {Perm: perm(AccessRules, View), Target: func(g *Guard, r any) Target { return g.storedRuleTarget(named(r)) }},
	identitySvc + "DeleteAccessRule": {Perm: perm(AccessRules, Delete), Check: checkRevoke, Target: func(g *Guard, r any) Target { return g.storedRuleTarget(named(r)) }},
	identitySvc + "ListAccessRules": {Perm: perm(AccessRules, View), Target: func(*Guard, any) Target { return anywhere("accessRules") },
		Filter: func(g *Guard, resp any, ok keep) {
			r := resp.(*identityv1.ListAccessRulesResponse)
			r.AccessRules = filterSlice(r.AccessRules, func(a *identityv1.AccessRule) bool { return ok(g.ruleTarget(a), Attrs{}) })
		}},
	identitySvc + "ListAuditEvents": {Perm: perm(Audit, View), Target: func(*Guard, any) Target { return account("auditEvents") }},
}

// storedRuleTarget is the scope of an existing rule; the account for an
// unknown one (only account administrators learn that it does not exist).
func (g *Guard) storedRuleTarget(name string) Target {
	r, ok := g.rules.get(strings.TrimPrefix(name, "accessRules/"))
	if !ok {
		return account(name)
	}
	return g.ruleTarget(r)
}
