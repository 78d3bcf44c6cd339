package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/identity"
)

// tenancy is a `runway dev` with two departments: dept-a holds team-a and
// team-a2, dept-b holds team-b; the administrator submitted one training to
// each project.
type tenancy struct {
	addr  string
	admin *grpc.ClientConn
	conns map[string]*grpc.ClientConn // by token
}

func startTenancy(t *testing.T) *tenancy {
	t.Helper()
	return startTenancyWith(t, nil)
}

// startTenancyWith is startTenancy with changes to the dev configuration
// (nodes, for instance).
func startTenancyWith(t *testing.T, change func(*server.DevConfig)) *tenancy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	cfg := server.DevConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: quiet,
		Identity:    identity.Config{BcryptCost: bcrypt.MinCost},
		EtcdOptions: []etcdtest.Option{etcdtest.WithTestSpeedups()}}
	if change != nil {
		change(&cfg)
	}
	go func() {
		done <- server.RunDev(ctx, cfg, func(addr, token string) { ready <- [2]string{addr, token} })
	}()
	var r [2]string
	select {
	case r = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("RunDev: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunDev: %v", err)
		}
	})
	tn := &tenancy{addr: r[0], conns: map[string]*grpc.ClientConn{}}
	tn.admin = tn.conn(t, r[1])
	q := quotav1.NewQuotaServiceClient(tn.admin)
	for _, d := range []string{"dept-a", "dept-b"} {
		if _, err := q.CreateDepartment(t.Context(), &quotav1.CreateDepartmentRequest{DepartmentId: d,
			Department: &quotav1.Department{}}); err != nil {
			t.Fatalf("CreateDepartment(%s): %v", d, err)
		}
	}
	w := workloadv1.NewWorkloadServiceClient(tn.admin)
	for p, d := range map[string]string{"team-a": "dept-a", "team-a2": "dept-a", "team-b": "dept-b"} {
		if _, err := q.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: p,
			Project: &quotav1.Project{Department: "departments/" + d}}); err != nil {
			t.Fatalf("CreateProject(%s): %v", p, err)
		}
		if _, err := w.CreateWorkload(t.Context(), training("projects/"+p, workloadOf[p])); err != nil {
			t.Fatalf("CreateWorkload(%s): %v", p, err)
		}
	}
	return tn
}

var workloadOf = map[string]string{"team-a": "wa", "team-a2": "wa2", "team-b": "wb"}

func training(parent, id string) *workloadv1.CreateWorkloadRequest {
	return &workloadv1.CreateWorkloadRequest{Parent: parent, WorkloadId: id, Workload: &workloadv1.Workload{
		Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "30"}}}}
}

func (tn *tenancy) conn(t *testing.T, token string) *grpc.ClientConn {
	t.Helper()
	if c, ok := tn.conns[token]; ok {
		return c
	}
	c, err := grpc.NewClient("passthrough:///"+tn.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	tn.conns[token] = c
	return c
}

// member creates a user holding role on scope and returns its token. The
// guard's caches follow etcd, so the test waits until the rule applies.
func (tn *tenancy) member(t *testing.T, id, role string, scope *identityv1.Scope) string {
	t.Helper()
	ids := identityv1.NewIdentityServiceClient(tn.admin)
	if _, err := ids.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: id,
		User: &identityv1.User{Email: id + "@example.com", Password: "first password of " + id}}); err != nil {
		t.Fatalf("CreateUser(%s): %v", id, err)
	}
	if _, err := ids.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/" + id},
		Role:    role, Scope: scope}}); err != nil {
		t.Fatalf("CreateAccessRule(%s %s): %v", id, role, err)
	}
	var token string
	eventuallyOK(t, "sign-in of "+id, func() error {
		r, err := ids.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
			Password: &identityv1.PasswordCredentials{User: id, Password: "first password of " + id,
				NewPassword: "second password of " + id}}})
		if err != nil {
			r, err = ids.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
				Password: &identityv1.PasswordCredentials{User: id, Password: "second password of " + id}}})
		}
		if err != nil {
			return err
		}
		token = r.GetAccessToken()
		c, err := identityv1.NewIdentityServiceClient(tn.conn(t, token)).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
		if err != nil {
			return err
		}
		if len(c.GetAccessRules()) != 1 {
			return fmt.Errorf("rules %v", c.GetAccessRules())
		}
		return nil
	})
	return token
}

func eventuallyOK(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Where a matrix call acts, as the test reads the RPC (independently of
// pkg/auth's declarations).
type where int

const (
	inProject        where = iota // in a project: covered by the project's rules, its department's and the account's
	inDepartment                  // a department itself, or a project created in it
	onAccount                     // only account rules
	anyScope                      // cluster-wide things any rule may see (node pools, nodes, roles)
	listing                       // a list across scopes: allowed with the permission anywhere, then filtered
	withinDepartment              // seen from the department, its projects and the account (a department's policies and assets)
	nodeAgentOnly                 // a node agent's own call (credentials' values): no user's, whatever the role
	ticketOnly                    // takes a tool ticket as its credential: every API token is refused (Unauthenticated)
)

// call is one request of the matrix.
type call struct {
	method string
	where  where
	target string // the project or department the call is about
	own    bool   // the caller is the resource's creator (creates)
	req    proto.Message
}

const etagStale = "1" // every resource's etag is past revision 1: a write with it changes nothing

// matrixCalls builds, for every RPC, the requests of the matrix: one per
// target project or department where the RPC acts in one. Writes are made
// harmless (a stale etag, an invalid id or a missing resource), so the
// handler answers after the permission check without changing the fixture.
func matrixCalls() []call {
	const (
		q  = "/runway.quota.v1.QuotaService/"
		w  = "/runway.workload.v1.WorkloadService/"
		s  = "/runway.scheduler.v1.SchedulerService/"
		n  = "/runway.nodemanager.v1.NodeManagerService/"
		id = "/runway.identity.v1.IdentityService/"
		g  = "/runway.workload.v1.GovernanceService/"
		m  = "/runway.metrics.v1.MetricsService/"
		r  = "/runway.metrics.v1.ReportService/"
		cr = "/runway.workload.v1.CredentialService/"
		ds = "/runway.workload.v1.DataSourceService/"
		nt = "/runway.workload.v1.NotificationService/"
		tl = "/runway.workload.v1.ToolService/"
	)
	badMask := &fieldmaskpb.FieldMask{Paths: []string{"no_such_field"}}
	// Policies and assets at a scope (scope is "" for the account): writes
	// need the grant there; views of a project's need it there too, of a
	// department's the permission in the department or one of its
	// projects, of the account's only the permission somewhere.
	governed := func(scope string, write, view where, target string) []call {
		prefix := scope
		if prefix != "" {
			prefix += "/"
		}
		policy := prefix + "policies/training"
		return []call{
			{g + "GetPolicy", view, target, false, &workloadv1.GetPolicyRequest{Name: policy}},
			{g + "UpdatePolicy", write, target, false, &workloadv1.UpdatePolicyRequest{Policy: &workloadv1.Policy{Name: policy}, UpdateMask: badMask}},
			{g + "DeletePolicy", write, target, false, &workloadv1.DeletePolicyRequest{Name: policy, Etag: etagStale}},
			{g + "CreateEnvironment", write, target, false, &workloadv1.CreateEnvironmentRequest{Parent: scope, EnvironmentId: "BAD_ID"}},
			{g + "GetEnvironment", view, target, false, &workloadv1.GetEnvironmentRequest{Name: prefix + "environments/nope"}},
			{g + "ListEnvironments", view, target, false, &workloadv1.ListEnvironmentsRequest{Parent: scope}},
			{g + "DeleteEnvironment", write, target, false, &workloadv1.DeleteEnvironmentRequest{Name: prefix + "environments/nope"}},
			{g + "CreateComputeResource", write, target, false, &workloadv1.CreateComputeResourceRequest{Parent: scope, ComputeResourceId: "BAD_ID"}},
			{g + "GetComputeResource", view, target, false, &workloadv1.GetComputeResourceRequest{Name: prefix + "computeResources/nope"}},
			{g + "ListComputeResources", view, target, false, &workloadv1.ListComputeResourcesRequest{Parent: scope}},
			{g + "DeleteComputeResource", write, target, false, &workloadv1.DeleteComputeResourceRequest{Name: prefix + "computeResources/nope"}},
			{g + "CreateTemplate", write, target, false, &workloadv1.CreateTemplateRequest{Parent: scope, TemplateId: "BAD_ID"}},
			{g + "GetTemplate", view, target, false, &workloadv1.GetTemplateRequest{Name: prefix + "templates/nope"}},
			{g + "ListTemplates", view, target, false, &workloadv1.ListTemplatesRequest{Parent: scope}},
			{g + "DeleteTemplate", write, target, false, &workloadv1.DeleteTemplateRequest{Name: prefix + "templates/nope"}},
			{g + "RenameTemplate", write, target, false, &workloadv1.RenameTemplateRequest{Name: prefix + "templates/nope", NewTemplateId: "BAD_ID"}},
			{cr + "CreateCredential", write, target, false, &workloadv1.CreateCredentialRequest{Parent: scope, CredentialId: "BAD_ID"}},
			{cr + "GetCredential", view, target, false, &workloadv1.GetCredentialRequest{Name: prefix + "credentials/nope"}},
			{cr + "ListCredentials", view, target, false, &workloadv1.ListCredentialsRequest{Parent: scope}},
			{cr + "DeleteCredential", write, target, false, &workloadv1.DeleteCredentialRequest{Name: prefix + "credentials/nope"}},
			{ds + "CreateDataSource", write, target, false, &workloadv1.CreateDataSourceRequest{Parent: scope, DataSourceId: "BAD_ID"}},
			{ds + "GetDataSource", view, target, false, &workloadv1.GetDataSourceRequest{Name: prefix + "dataSources/nope"}},
			{ds + "ListDataSources", view, target, false, &workloadv1.ListDataSourcesRequest{Parent: scope}},
			{ds + "UpdateDataSource", write, target, false, &workloadv1.UpdateDataSourceRequest{DataSource: &workloadv1.DataSource{Name: prefix + "dataSources/nope"}}},
			{ds + "DeleteDataSource", write, target, false, &workloadv1.DeleteDataSourceRequest{Name: prefix + "dataSources/nope"}},
		}
	}
	var out []call
	for _, p := range []string{"team-a", "team-a2", "team-b"} {
		out = append(out, governed("projects/"+p, inProject, inProject, p)...)
		out = append(out, call{g + "GetEffectivePolicy", inProject, p, false, &workloadv1.GetEffectivePolicyRequest{Name: "projects/" + p + "/policies/training"}})
		proj := "projects/" + p
		wl := proj + "/workloads/" + workloadOf[p]
		bad := training(proj, "BAD_ID")
		out = append(out,
			call{q + "GetProject", inProject, p, false, &quotav1.GetProjectRequest{Name: proj}},
			call{q + "UpdateProject", inProject, p, false, &quotav1.UpdateProjectRequest{Project: &quotav1.Project{Name: proj}, UpdateMask: badMask}},
			call{q + "DeleteProject", inProject, p, false, &quotav1.DeleteProjectRequest{Name: proj, Etag: etagStale}},
			call{w + "CreateWorkload", inProject, p, true, bad},
			call{w + "GetWorkload", inProject, p, false, &workloadv1.GetWorkloadRequest{Name: wl}},
			call{w + "ListWorkloads", inProject, p, false, &workloadv1.ListWorkloadsRequest{Parent: proj}},
			call{w + "DeleteWorkload", inProject, p, false, &workloadv1.DeleteWorkloadRequest{Name: wl, Etag: etagStale}},
			call{w + "SuspendWorkload", inProject, p, false, &workloadv1.SuspendWorkloadRequest{Name: wl, Etag: etagStale}},
			call{w + "ResumeWorkload", inProject, p, false, &workloadv1.ResumeWorkloadRequest{Name: wl, Etag: etagStale}},
			call{w + "SetWorkloadPriority", inProject, p, false, &workloadv1.SetWorkloadPriorityRequest{Name: wl, Priority: "train", Etag: etagStale}},
			call{w + "WatchWorkloads", inProject, p, false, &workloadv1.WatchWorkloadsRequest{Parent: proj}},
			call{w + "ReadWorkloadLogs", inProject, p, false, &workloadv1.ReadWorkloadLogsRequest{Name: wl}},
			call{tl + "CreateToolTicket", inProject, p, false, &workloadv1.CreateToolTicketRequest{Name: wl, Tool: "nope"}},
			call{tl + "ResolveTool", inProject, p, false, &workloadv1.ResolveToolRequest{Name: wl, Tool: "nope"}},
			call{tl + "ExchangeToolTicket", ticketOnly, p, false, &workloadv1.ExchangeToolTicketRequest{Name: wl, Tool: "nope"}},
			call{s + "GetQueue", inProject, p, false, &schedulerv1.GetQueueRequest{Name: proj + "/queue"}},
			call{m + "QueryProjectMetrics", inProject, p, false, &metricsv1.QueryProjectMetricsRequest{Name: proj}},
			call{m + "QueryWorkloadMetrics", inProject, p, false, &metricsv1.QueryWorkloadMetricsRequest{Name: wl}},
			call{r + "CreateReport", inProject, p, false, &metricsv1.CreateReportRequest{Report: &metricsv1.Report{Project: proj}}},
			call{s + "ExplainWorkload", inProject, p, false, &schedulerv1.ExplainWorkloadRequest{Name: wl}},
			call{id + "CreateAccessRule", inProject, p, false, &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
				Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/nobody"},
				Role:    "roles/viewer", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: proj}}}},
		)
	}
	out = append(out, governed("", onAccount, anyScope, "")...)
	for _, d := range []string{"dept-a", "dept-b"} {
		out = append(out, governed("departments/"+d, inDepartment, withinDepartment, d)...)
		dept := "departments/" + d
		out = append(out,
			call{q + "GetDepartment", inDepartment, d, false, &quotav1.GetDepartmentRequest{Name: dept}},
			call{m + "QueryDepartmentMetrics", inDepartment, d, false, &metricsv1.QueryDepartmentMetricsRequest{Name: dept}},
			call{r + "CreateReport", inDepartment, d, false, &metricsv1.CreateReportRequest{Report: &metricsv1.Report{Department: dept}}},
			call{q + "UpdateDepartment", inDepartment, d, false, &quotav1.UpdateDepartmentRequest{Department: &quotav1.Department{Name: dept}, UpdateMask: badMask}},
			call{q + "CreateProject", inDepartment, d, false, &quotav1.CreateProjectRequest{ProjectId: "BAD_ID", Project: &quotav1.Project{Department: dept}}},
		)
	}
	return append(out,
		call{q + "ListProjects", listing, "", false, &quotav1.ListProjectsRequest{}},
		call{g + "ListPolicies", listing, "", false, &workloadv1.ListPoliciesRequest{}},
		call{q + "ListDepartments", listing, "", false, &quotav1.ListDepartmentsRequest{}},
		call{q + "DeleteDepartment", onAccount, "", false, &quotav1.DeleteDepartmentRequest{Name: "departments/dept-a", Etag: etagStale}},
		call{q + "CreateDepartment", onAccount, "", false, &quotav1.CreateDepartmentRequest{DepartmentId: "BAD_ID"}},
		call{q + "GetNodePool", anyScope, "", false, &quotav1.GetNodePoolRequest{Name: "nodepools/default"}},
		call{q + "ListNodePools", anyScope, "", false, &quotav1.ListNodePoolsRequest{}},
		call{q + "CreateNodePool", onAccount, "", false, &quotav1.CreateNodePoolRequest{NodePoolId: "BAD_ID"}},
		call{q + "UpdateNodePool", onAccount, "", false, &quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{Name: "nodepools/nope"}, UpdateMask: badMask}},
		call{q + "DeleteNodePool", onAccount, "", false, &quotav1.DeleteNodePoolRequest{Name: "nodepools/nope"}},
		call{q + "GetSettings", anyScope, "", false, &quotav1.GetSettingsRequest{Name: "settings"}},
		call{q + "UpdateSettings", onAccount, "", false, &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings"}, UpdateMask: badMask}},
		call{w + "ListWorkloads", listing, "", false, &workloadv1.ListWorkloadsRequest{Parent: "projects/-"}},
		call{w + "WatchWorkloads", listing, "", false, &workloadv1.WatchWorkloadsRequest{Parent: "projects/-"}},
		call{s + "ListQueues", listing, "", false, &schedulerv1.ListQueuesRequest{}},
		call{s + "GetLeader", anyScope, "", false, &schedulerv1.GetLeaderRequest{Name: "schedulers/leader"}},
		call{n + "GetNode", anyScope, "", false, &nodemanagerv1.GetNodeRequest{Name: "nodes/nope"}},
		call{n + "ListNodes", anyScope, "", false, &nodemanagerv1.ListNodesRequest{}},
		call{cr + "ReencryptCredentials", onAccount, "", false, &workloadv1.ReencryptCredentialsRequest{}},
		call{cr + "ResolvePodCredentials", nodeAgentOnly, "", false, &workloadv1.ResolvePodCredentialsRequest{Node: "nodes/node-1",
			Workload: "projects/team-a/workloads/nope"}},
		call{n + "DrainNode", onAccount, "", false, &nodemanagerv1.DrainNodeRequest{Name: "nodes/nope"}},
		call{n + "UndrainNode", onAccount, "", false, &nodemanagerv1.UndrainNodeRequest{Name: "nodes/nope"}},
		call{n + "SetNodeRoles", onAccount, "", false, &nodemanagerv1.SetNodeRolesRequest{Name: "nodes/nope"}},
		call{n + "ReportWorkloadState", onAccount, "", false, &nodemanagerv1.ReportWorkloadStateRequest{Node: "nodes/nope"}},
		call{n + "CreateNodeAgentToken", onAccount, "", false, &nodemanagerv1.CreateNodeAgentTokenRequest{Node: "nodes/BAD_ID"}},
		call{n + "GetTimeSlicePlan", anyScope, "", false, &nodemanagerv1.GetTimeSlicePlanRequest{Name: "nodes/nope/timeSlicePlan"}},
		call{id + "CreateUser", onAccount, "", false, &identityv1.CreateUserRequest{UserId: "BAD_ID"}},
		call{id + "GetUser", anyScope, "", false, &identityv1.GetUserRequest{Name: "users/admin"}},
		call{id + "ListUsers", anyScope, "", false, &identityv1.ListUsersRequest{}},
		call{id + "DeleteUser", onAccount, "", false, &identityv1.DeleteUserRequest{Name: "users/nobody"}},
		call{id + "ResetUserPassword", onAccount, "", false, &identityv1.ResetUserPasswordRequest{Name: "users/nobody"}},
		call{id + "CreateApplication", anyScope, "", true, &identityv1.CreateApplicationRequest{ApplicationId: "BAD_ID"}},
		call{id + "GetApplication", anyScope, "", false, &identityv1.GetApplicationRequest{Name: "applications/nope"}},
		call{id + "ListApplications", listing, "", false, &identityv1.ListApplicationsRequest{}},
		call{id + "DeleteApplication", anyScope, "", false, &identityv1.DeleteApplicationRequest{Name: "applications/nope"}},
		call{id + "RegenerateApplicationSecret", anyScope, "", false, &identityv1.RegenerateApplicationSecretRequest{Name: "applications/nope"}},
		call{id + "GetAccessRule", onAccount, "", false, &identityv1.GetAccessRuleRequest{Name: "accessRules/nope"}},
		call{id + "DeleteAccessRule", onAccount, "", false, &identityv1.DeleteAccessRuleRequest{Name: "accessRules/nope"}},
		call{id + "ListAccessRules", listing, "", false, &identityv1.ListAccessRulesRequest{}},
		call{id + "ListAuditEvents", onAccount, "", false, &identityv1.ListAuditEventsRequest{}},
		call{m + "QueryNodePoolMetrics", anyScope, "", false, &metricsv1.QueryNodePoolMetricsRequest{Name: "nodepools/default"}},
		call{m + "QueryNodeMetrics", anyScope, "", false, &metricsv1.QueryNodeMetricsRequest{Name: "nodes/node-1"}},
		call{m + "QueryClusterMetrics", onAccount, "", false, &metricsv1.QueryClusterMetricsRequest{Name: "cluster"}},
		call{m + "GetTelemetry", listing, "", false, &metricsv1.GetTelemetryRequest{Name: "telemetry"}},
		call{r + "CreateReport", onAccount, "", false, &metricsv1.CreateReportRequest{Report: &metricsv1.Report{}}},
		call{r + "GetReport", anyScope, "", false, &metricsv1.GetReportRequest{Name: "reports/nope"}},
		call{r + "ListReports", listing, "", false, &metricsv1.ListReportsRequest{}},
		call{r + "DownloadReport", anyScope, "", false, &metricsv1.DownloadReportRequest{Name: "reports/nope"}},
		call{r + "DeleteReport", anyScope, "", false, &metricsv1.DeleteReportRequest{Name: "reports/nope"}},
		// Subscriptions are the caller's own (the service refuses others'):
		// anyone who views workloads somewhere holds them.
		call{nt + "CreateSubscription", anyScope, "", false, &workloadv1.CreateSubscriptionRequest{Parent: "users/-", SubscriptionId: "BAD_ID"}},
		call{nt + "GetSubscription", anyScope, "", false, &workloadv1.GetSubscriptionRequest{Name: "users/-/subscriptions/nope"}},
		call{nt + "ListSubscriptions", anyScope, "", false, &workloadv1.ListSubscriptionsRequest{Parent: "users/-"}},
		call{nt + "DeleteSubscription", anyScope, "", false, &workloadv1.DeleteSubscriptionRequest{Name: "users/-/subscriptions/nope"}},
		call{nt + "ListDeliveries", anyScope, "", false, &workloadv1.ListDeliveriesRequest{Parent: "users/-/subscriptions/nope"}},
	)
}

// grantScope is where the matrix grants a role: team-a, its department, or
// the account.
type grantScope struct {
	label string
	scope *identityv1.Scope
}

var grantScopes = []grantScope{
	{"project", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"}},
	{"department", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, Name: "departments/dept-a"}},
	{"account", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT}},
}

// departmentOf is the fixture's layout.
var departmentOf = map[string]string{"team-a": "dept-a", "team-a2": "dept-a", "team-b": "dept-b"}

// covered: does a grant on g reach c?
func covered(g grantScope, c call) bool {
	switch c.where {
	case anyScope, listing:
		return true
	case onAccount:
		return g.label == "account"
	case inDepartment:
		return g.label == "account" || g.label == "department" && c.target == "dept-a"
	case withinDepartment:
		return g.label == "account" || c.target == "dept-a" // the project grant is on team-a, in dept-a
	}
	switch g.label {
	case "account":
		return true
	case "department":
		return departmentOf[c.target] == "dept-a"
	}
	return c.target == "team-a"
}

// expected reads the role table: the grant for the RPC's permission, on a
// covered scope; an Own grant holds only on what the caller creates; an
// Inference grant never holds here (the fixture's workloads are trainings);
// a listing needs the permission at all.
func expected(role *auth.Role, p auth.Permission, g grantScope, c call) bool {
	gr := role.Grant(p)
	if !covered(g, c) || gr == auth.None || c.where == nodeAgentOnly {
		return false
	}
	return c.where == listing || gr == auth.All || gr == auth.Own && c.own
}

// invoke sends req to method over conn (unary, or the first message of a
// server stream) and returns the status code.
func invoke(ctx context.Context, conn *grpc.ClientConn, method string, req proto.Message) codes.Code {
	svc, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return codes.Internal
	}
	md := d.(protoreflect.ServiceDescriptor).Methods().ByName(protoreflect.Name(name))
	out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return codes.Internal
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp := out.New().Interface()
	if !md.IsStreamingServer() {
		return status.Code(conn.Invoke(ctx, method, req, resp))
	}
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err == nil {
		if err = st.SendMsg(req); err == nil {
			if err = st.CloseSend(); err == nil {
				err = st.RecvMsg(resp)
			}
		}
	}
	return status.Code(err)
}

// TestAccessMatrix is the matrix generated from the role table: every
// grantable role, granted on a project (team-a), a department (dept-a) or
// the account, calls every RPC on its own project, a sibling project of its
// department, another department's project, departments and account-wide
// things; each call is allowed or PermissionDenied exactly as the table
// says.
func TestAccessMatrix(t *testing.T) {
	tn := startTenancy(t)
	calls := matrixCalls()
	methods := auth.Methods()
	checked := 0
	for _, role := range auth.Roles() {
		for _, g := range grantScopes {
			if !role.Grantable(g.scope.GetKind()) {
				continue
			}
			user := role.ID + "-" + g.label
			conn := tn.conn(t, tn.member(t, user, "roles/"+role.ID, g.scope))
			for _, c := range calls {
				m, ok := methods[c.method]
				if !ok {
					t.Fatalf("%s has no declaration", c.method)
				}
				want := expected(role, m.Perm, g, c)
				code := invoke(t.Context(), conn, c.method, c.req)
				if c.where == ticketOnly {
					if code != codes.Unauthenticated {
						t.Errorf("%s on %s: %s %s with an API token: got %v, want Unauthenticated", role.ID, g.label, c.method, c.target, code)
					}
					checked++
					continue
				}
				if got := code != codes.PermissionDenied; got != want {
					t.Errorf("%s on %s: %s %s: got %v, want allowed=%v", role.ID, g.label, c.method, c.target, code, want)
				}
				if code == codes.Unauthenticated || code == codes.Internal || code == codes.Unimplemented {
					t.Errorf("%s on %s: %s %s: %v", role.ID, g.label, c.method, c.target, code)
				}
				checked++
			}
		}
	}
	// Every checked RPC is in the matrix.
	inMatrix := map[string]bool{}
	for _, c := range calls {
		inMatrix[c.method] = true
	}
	for name, m := range methods {
		// The node agents' own service is served by the agents, not here.
		if (m.Access == auth.Checked || m.Access == auth.NodeAgentOnly) && !inMatrix[name] && !strings.HasPrefix(name, "/runway.nodemanager.v1.NodeAgentService/") {
			t.Errorf("%s is not in the matrix", name)
		}
	}
	t.Logf("%d calls checked", checked)

	// Nothing the matrix sent changed the fixture: every project still has
	// its one workload.
	r, err := workloadv1.NewWorkloadServiceClient(tn.admin).ListWorkloads(t.Context(), &workloadv1.ListWorkloadsRequest{Parent: "projects/-"})
	if err != nil || len(r.GetWorkloads()) != 3 {
		t.Fatalf("workloads after the matrix: %v, %v", r, err)
	}
}

// TestEveryRPCDeclared walks the services the dev server has registered
// (through gRPC reflection) and finds a declaration for every method; a
// method without one is refused (deny by default).
func TestEveryRPCDeclared(t *testing.T) {
	tn := startTenancy(t)
	st, err := reflectionpb.NewServerReflectionClient(tn.admin).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	methods := auth.Methods()
	var services []string
	count := 0
	for _, s := range resp.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(s.GetName()))
		if err != nil {
			t.Errorf("registered service %s: %v", s.GetName(), err)
			continue
		}
		ms := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range ms.Len() {
			full := "/" + s.GetName() + "/" + string(ms.Get(i).Name())
			if _, ok := methods[full]; !ok {
				t.Errorf("%s has no declared permission", full)
			}
			count++
		}
	}
	for _, want := range []string{"runway.identity.v1.IdentityService", "runway.quota.v1.QuotaService",
		"runway.workload.v1.WorkloadService", "runway.scheduler.v1.SchedulerService", "runway.nodemanager.v1.NodeManagerService",
		"runway.metrics.v1.MetricsService", "runway.metrics.v1.ReportService", "runway.workload.v1.NotificationService"} {
		if !slices.Contains(services, want) {
			t.Errorf("%s is not registered: %v", want, services)
		}
	}
	t.Logf("%d methods of %d services declared", count, len(services))
}

// TestCrossTenant: an L1 researcher of team-a cannot see, describe, delete
// or change team-b's workloads, through gRPC or REST; its lists show only
// team-a's.
func TestCrossTenant(t *testing.T) {
	tn := startTenancy(t)
	token := tn.member(t, "alice", "roles/l1-researcher",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})
	w := workloadv1.NewWorkloadServiceClient(tn.conn(t, token))
	s := schedulerv1.NewSchedulerServiceClient(tn.conn(t, token))
	wb := "projects/team-b/workloads/wb"
	denied := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", what, err)
		}
	}
	_, err := w.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: wb})
	denied("GetWorkload team-b", err)
	_, err = s.ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{Name: wb})
	denied("ExplainWorkload team-b", err)
	_, err = w.DeleteWorkload(t.Context(), &workloadv1.DeleteWorkloadRequest{Name: wb})
	denied("DeleteWorkload team-b", err)
	_, err = w.SuspendWorkload(t.Context(), &workloadv1.SuspendWorkloadRequest{Name: wb})
	denied("SuspendWorkload team-b", err)
	_, err = w.CreateWorkload(t.Context(), training("projects/team-b", "sneaky"))
	denied("CreateWorkload in team-b", err)
	_, err = w.ListWorkloads(t.Context(), &workloadv1.ListWorkloadsRequest{Parent: "projects/team-b"})
	denied("ListWorkloads team-b", err)
	// Its own project: it sees the administrator's workload but may not
	// delete it; it deletes its own.
	if _, err := w.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/wa"}); err != nil {
		t.Errorf("GetWorkload team-a: %v", err)
	}
	_, err = w.DeleteWorkload(t.Context(), &workloadv1.DeleteWorkloadRequest{Name: "projects/team-a/workloads/wa"})
	denied("DeleteWorkload of another user's workload in team-a", err)
	mine, err := w.CreateWorkload(t.Context(), training("projects/team-a", "mine"))
	if err != nil || mine.GetCreator() != "users/alice" {
		t.Fatalf("CreateWorkload team-a = %v, %v", mine, err)
	}
	if _, err := w.SuspendWorkload(t.Context(), &workloadv1.SuspendWorkloadRequest{Name: mine.GetName()}); err != nil {
		t.Errorf("SuspendWorkload of its own: %v", err)
	}
	names := func(ws []*workloadv1.Workload) []string {
		var out []string
		for _, x := range ws {
			out = append(out, x.GetName())
		}
		slices.Sort(out)
		return out
	}
	l, err := w.ListWorkloads(t.Context(), &workloadv1.ListWorkloadsRequest{Parent: "projects/-"})
	if err != nil || !slices.Equal(names(l.GetWorkloads()), []string{"projects/team-a/workloads/mine", "projects/team-a/workloads/wa"}) {
		t.Errorf("ListWorkloads projects/- = %v, %v; want only team-a's", names(l.GetWorkloads()), err)
	}
	// The watch sends only team-a's too: its initial listing is every
	// workload it may see, then the test's own change (made once the
	// listing is over: a change made before the server reads the listing
	// would be in it, not after it).
	ws, err := w.WatchWorkloads(t.Context(), &workloadv1.WatchWorkloadsRequest{Parent: "projects/-"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := ws.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetWorkload() == nil { // SYNCED
			break
		}
		if !strings.HasPrefix(ev.GetWorkload().GetName(), "projects/team-a/") {
			t.Fatalf("the watch's listing sent %v", ev)
		}
	}
	if _, err := workloadv1.NewWorkloadServiceClient(tn.admin).SuspendWorkload(t.Context(),
		&workloadv1.SuspendWorkloadRequest{Name: wb}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.DeleteWorkload(t.Context(), &workloadv1.DeleteWorkloadRequest{Name: mine.GetName()}); err != nil {
		t.Fatalf("DeleteWorkload of its own: %v", err)
	}
	for {
		ev, err := ws.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if ev.GetWorkload() == nil {
			continue
		}
		if !strings.HasPrefix(ev.GetWorkload().GetName(), "projects/team-a/") {
			t.Fatalf("the watch sent %v", ev)
		}
		if ev.GetType() == workloadv1.WatchEventType_WATCH_EVENT_TYPE_DELETED && ev.GetWorkload().GetName() == mine.GetName() {
			break
		}
	}

	// REST goes through the same check.
	rest := func(method, path string) (int, string) {
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+tn.addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/projects/team-b/workloads/wb"},
		{http.MethodDelete, "/v1/projects/team-b/workloads/wb"},
		{http.MethodPost, "/v1/projects/team-b/workloads/wb:suspend"},
		{http.MethodGet, "/v1/projects/team-b/workloads"},
	} {
		if code, body := rest(r.method, r.path); code != http.StatusForbidden || !strings.Contains(body, "PERMISSION_DENIED") {
			t.Errorf("REST %s %s: %d %s, want 403 PERMISSION_DENIED", r.method, r.path, code, body)
		}
	}
	code, body := rest(http.MethodGet, "/v1/projects/-/workloads")
	if code != http.StatusOK || !strings.Contains(body, "projects/team-a/workloads/wa") || strings.Contains(body, "team-b") {
		t.Errorf("REST list of every project: %d %s, want only team-a's", code, body)
	}
	if code, _ := rest(http.MethodGet, "/v1/projects/team-a/workloads/wa"); code != http.StatusOK {
		t.Errorf("REST GET of a team-a workload: %d", code)
	}
	// Without a token REST is refused as well.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+tn.addr+"/v1/projects/team-a/workloads/wa", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("REST without a token: %d, want 401", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
}
