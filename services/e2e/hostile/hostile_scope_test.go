package hostile

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// Rules and policies set from a wider scope hold against the scopes below:
// each records who set it (set_by) and only that scope, or a wider one,
// changes or removes it.

// scopeRefused fails unless err refuses a change for the scope setBy that
// set what it would change: PERMISSION_DENIED naming that scope.
func scopeRefused(t *testing.T, what string, err error, setBy string) {
	t.Helper()
	apiWant(t, what, err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	if md := apierr.Info(err).GetMetadata(); md["setBy"] != setBy || md["resource"] != setBy {
		t.Fatalf("%s: refused with %v (metadata %v), want the scope %q that set it named", what, err, md, setBy)
	}
}

// The roles acting on team-a from below the account: dept-a's
// administrator, and the widest role a project's own member can hold
// (research-manager: no role grants projects.edit or policies.edit on a
// project scope, so the project's own people are refused by the permission
// table before any setter is looked at).
func scopeActors(t *testing.T, d *apiDev) (dept, project string) {
	return d.member(t, "da", "roles/department-admin", apiScope(identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, "departments/dept-a")),
		d.member(t, "pm", "roles/research-manager", apiScope(identityv1.ScopeKind_SCOPE_KIND_PROJECT, "projects/team-a"))
}

func trainingRule(limit time.Duration) *quotav1.SchedulingRules {
	return &quotav1.SchedulingRules{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, TimeLimit: durationpb.New(limit)}
}

func setProjectRules(q quotav1.QuotaServiceClient, t *testing.T, rules ...*quotav1.SchedulingRules) (*quotav1.Project, error) {
	return q.UpdateProject(t.Context(), &quotav1.UpdateProjectRequest{
		Project:    &quotav1.Project{Name: "projects/team-a", SchedulingRules: rules},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"scheduling_rules"}}})
}

// An account-set scheduling rule on a project is neither deleted nor
// loosened by the project's department administrator (nor by deleting the
// project with it) or by the project's own manager; the department
// administrator still adds its own rule for another type beside it, which
// the project's manager cannot touch either; the account still changes its
// own.
func TestHostileAccountRuleOnProjectHeldBelow(t *testing.T) {
	d := apiStartDev(t, nil)
	q := quotav1.NewQuotaServiceClient(d.admin)
	got, err := setProjectRules(q, t, trainingRule(8*time.Hour))
	if err != nil {
		t.Fatalf("the account sets team-a's rules: %v", err)
	}
	if by := got.GetSchedulingRules()[0].GetSetBy(); by != "account" {
		t.Fatalf("the account's rule says it was set by %q", by)
	}
	daToken, pmToken := scopeActors(t, d)
	da, pm := quotav1.NewQuotaServiceClient(d.conn(t, daToken)), quotav1.NewQuotaServiceClient(d.conn(t, pmToken))

	_, err = setProjectRules(da, t)
	scopeRefused(t, "dept-a's administrator deletes team-a's account rule", err, "account")
	_, err = setProjectRules(da, t, trainingRule(800*time.Hour))
	scopeRefused(t, "dept-a's administrator loosens it", err, "account")
	forged := trainingRule(800 * time.Hour)
	forged.SetBy = "departments/dept-a"
	_, err = setProjectRules(da, t, forged)
	scopeRefused(t, "dept-a's administrator loosens it, claiming to have set it", err, "account")
	_, err = da.UpdateProject(t.Context(), &quotav1.UpdateProjectRequest{
		Project:    &quotav1.Project{Name: "projects/team-a", Department: "departments/dept-a", Description: "mine"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"*"}}})
	scopeRefused(t, "dept-a's administrator replaces team-a whole", err, "account")
	_, err = da.DeleteProject(t.Context(), &quotav1.DeleteProjectRequest{Name: "projects/team-a"})
	scopeRefused(t, "dept-a's administrator deletes team-a to drop its rule", err, "account")
	if p := apierr.Info(err).GetMetadata()["permission"]; p != "projects.delete" {
		t.Errorf("the delete refused for %q, want projects.delete on the account", p)
	}
	_, err = setProjectRules(pm, t)
	apiWant(t, "team-a's research manager deletes the rule", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	if p := apierr.Info(err).GetMetadata()["permission"]; p != "projects.edit" {
		t.Fatalf("team-a's manager refused for %q (%v), want projects.edit", p, err)
	}

	// Below the account's rule, the department sets its own, the account's
	// sent back as it was read.
	cur, err := q.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/team-a"})
	if err != nil {
		t.Fatal(err)
	}
	ws := &quotav1.SchedulingRules{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, IdleGpuLimit: durationpb.New(time.Hour)}
	got, err = setProjectRules(da, t, cur.GetSchedulingRules()[0], ws)
	if err != nil {
		t.Fatalf("dept-a's administrator adds a workspace rule beside the account's: %v", err)
	}
	if by := []string{got.GetSchedulingRules()[0].GetSetBy(), got.GetSchedulingRules()[1].GetSetBy()}; by[0] != "account" || by[1] != "departments/dept-a" {
		t.Fatalf("setters after the department's write: %q, want the account's kept and dept-a's recorded", by)
	}
	_, err = setProjectRules(pm, t, got.GetSchedulingRules()[0])
	apiWant(t, "team-a's research manager deletes the department's rule", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)

	after, err := q.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if r := after.GetSchedulingRules(); len(r) != 2 || r[0].GetTimeLimit().AsDuration() != 8*time.Hour || r[0].GetSetBy() != "account" {
		t.Fatalf("team-a's rules after the attempts: %v, want the account's 8h and dept-a's", r)
	}
	// The account changes what it set, and what the department set.
	got, err = setProjectRules(q, t, trainingRule(4*time.Hour))
	if err != nil || len(got.GetSchedulingRules()) != 1 || got.GetSchedulingRules()[0].GetTimeLimit().AsDuration() != 4*time.Hour {
		t.Fatalf("the account changes its rule and drops dept-a's: %v, %v", got.GetSchedulingRules(), err)
	}
}

// A department-set rule on a project is the department's: the project's
// manager cannot delete or change it, the department's administrator can,
// and so can the account, after which it is the account's.
func TestHostileDepartmentRuleOnProjectHeldBelow(t *testing.T) {
	d := apiStartDev(t, nil)
	daToken, pmToken := scopeActors(t, d)
	da, pm := quotav1.NewQuotaServiceClient(d.conn(t, daToken)), quotav1.NewQuotaServiceClient(d.conn(t, pmToken))
	got, err := setProjectRules(da, t, trainingRule(8*time.Hour))
	if err != nil {
		t.Fatalf("dept-a's administrator sets team-a's rule: %v", err)
	}
	if by := got.GetSchedulingRules()[0].GetSetBy(); by != "departments/dept-a" {
		t.Fatalf("the department's rule says it was set by %q", by)
	}
	for what, rules := range map[string][]*quotav1.SchedulingRules{"deletes": nil, "loosens": {trainingRule(800 * time.Hour)}} {
		_, err = setProjectRules(pm, t, rules...)
		apiWant(t, "team-a's research manager "+what+" the department's rule", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	}
	// Another department's administrator does not reach team-a at all.
	db := quotav1.NewQuotaServiceClient(d.conn(t, d.member(t, "db", "roles/department-admin",
		apiScope(identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, "departments/dept-b"))))
	_, err = setProjectRules(db, t)
	apiWant(t, "dept-b's administrator deletes team-a's rule", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)

	if got, err = setProjectRules(da, t, trainingRule(6*time.Hour)); err != nil {
		t.Fatalf("dept-a's administrator changes its own rule: %v", err)
	}
	q := quotav1.NewQuotaServiceClient(d.admin)
	got, err = setProjectRules(q, t, trainingRule(2*time.Hour))
	if err != nil || got.GetSchedulingRules()[0].GetSetBy() != "account" {
		t.Fatalf("the account changes the department's rule: %v, %v", got.GetSchedulingRules(), err)
	}
	_, err = setProjectRules(da, t)
	scopeRefused(t, "dept-a's administrator deletes the rule the account set over its own", err, "account")
}

// A policy is held like a rule: one the account set on a department or on
// a project is neither loosened nor deleted by the department's
// administrator; one the department set on its project is not changed by
// the project's manager; each setter still changes its own.
func TestHostileAccountPolicyHeldBelow(t *testing.T) {
	d := apiStartDev(t, nil)
	gov := workloadv1.NewGovernanceServiceClient(d.admin)
	daToken, pmToken := scopeActors(t, d)
	da, pm := workloadv1.NewGovernanceServiceClient(d.conn(t, daToken)), workloadv1.NewGovernanceServiceClient(d.conn(t, pmToken))
	set := func(g workloadv1.GovernanceServiceClient, name, field string, max float64) (*workloadv1.Policy, error) {
		return g.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{AllowMissing: true, Policy: &workloadv1.Policy{
			Name: name, Rules: map[string]*workloadv1.FieldRule{field: {Max: proto.Float64(max)}}}})
	}
	for _, name := range []string{"departments/dept-a/policies/training", "projects/team-a/policies/inference"} {
		p, err := set(gov, name, "gpu.devices", 2)
		if err != nil || p.GetSetBy() != "account" {
			t.Fatalf("the account sets %s: %v (set by %q)", name, err, p.GetSetBy())
		}
		_, err = set(da, name, "gpu.devices", 64)
		scopeRefused(t, "dept-a's administrator loosens "+name, err, "account")
		_, err = da.DeletePolicy(t.Context(), &workloadv1.DeletePolicyRequest{Name: name})
		scopeRefused(t, "dept-a's administrator deletes "+name, err, "account")
		_, err = pm.DeletePolicy(t.Context(), &workloadv1.DeletePolicyRequest{Name: name})
		apiWant(t, "team-a's research manager deletes "+name, err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
		kept, err := gov.GetPolicy(t.Context(), &workloadv1.GetPolicyRequest{Name: name})
		if err != nil || kept.GetRules()["gpu.devices"].GetMax() != 2 {
			t.Fatalf("%s after the attempts: %v, %v, want the account's max 2", name, kept, err)
		}
	}
	// The department's own policy on its project: the project's manager
	// cannot change it, the department and the account can.
	const own = "projects/team-a/policies/workspace"
	p, err := set(da, own, "milliCpu", 4000)
	if err != nil || p.GetSetBy() != "departments/dept-a" {
		t.Fatalf("dept-a's administrator sets %s: %v (set by %q)", own, err, p.GetSetBy())
	}
	_, err = set(pm, own, "milliCpu", 64000)
	apiWant(t, "team-a's research manager loosens "+own, err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	if _, err := set(da, own, "milliCpu", 8000); err != nil {
		t.Fatalf("dept-a's administrator changes its own %s: %v", own, err)
	}
	if _, err := da.DeletePolicy(t.Context(), &workloadv1.DeletePolicyRequest{Name: own}); err != nil {
		t.Fatalf("dept-a's administrator deletes its own %s: %v", own, err)
	}
	if _, err := gov.DeletePolicy(t.Context(), &workloadv1.DeletePolicyRequest{Name: "departments/dept-a/policies/training"}); err != nil {
		t.Fatalf("the account deletes its policy on dept-a: %v", err)
	}
}

// Every asset kind of a project in dept-a (an environment with a value, a
// compute resource, a template with a value, a policy and the effective
// policy, and dept-a's own environment, compute resource and template) is out of reach of a researcher of
// team-b in dept-b: by name (gRPC and REST), by listing its scope, through
// a page token of a team-a researcher's listing, and by naming it in a
// submission; listing what team-b may see shows none of it. Team-a's
// researcher reads them all.
func TestHostileReadOtherProjectsAssets(t *testing.T) {
	d := apiStartDev(t, nil)
	gov := workloadv1.NewGovernanceServiceClient(d.admin)
	const secret = "value-of-team-a"
	for _, scope := range []string{"projects/team-a", "departments/dept-a"} {
		for _, id := range []string{"jupyter", "train"} {
			if _, err := gov.CreateEnvironment(t.Context(), &workloadv1.CreateEnvironmentRequest{Parent: scope, EnvironmentId: id,
				Environment: &workloadv1.Environment{Image: "jupyter/base", Env: []*workloadv1.EnvVar{{Name: "WANDB_API_KEY", Value: secret}}}}); err != nil {
				t.Fatalf("CreateEnvironment(%s/%s): %v", scope, id, err)
			}
		}
		if _, err := gov.CreateComputeResource(t.Context(), &workloadv1.CreateComputeResourceRequest{Parent: scope, ComputeResourceId: "big",
			ComputeResource: &workloadv1.ComputeResource{Description: secret, MilliCpu: 64000}}); err != nil {
			t.Fatalf("CreateComputeResource(%s): %v", scope, err)
		}
		if _, err := gov.CreateTemplate(t.Context(), &workloadv1.CreateTemplateRequest{Parent: scope, TemplateId: "nightly",
			Template: &workloadv1.Template{Environment: "jupyter", Spec: &workloadv1.WorkloadSpec{
				Env: []*workloadv1.EnvVar{{Name: "HF_TOKEN", Value: secret}}}}}); err != nil {
			t.Fatalf("CreateTemplate(%s): %v", scope, err)
		}
	}
	if _, err := gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{AllowMissing: true, Policy: &workloadv1.Policy{
		Name: "projects/team-a/policies/training", Defaults: &workloadv1.WorkloadSpec{Image: "registry/" + secret}}}); err != nil {
		t.Fatal(err)
	}
	raToken := d.member(t, "ra", "roles/l1-researcher", apiScope(identityv1.ScopeKind_SCOPE_KIND_PROJECT, "projects/team-a"))
	rbToken := d.member(t, "rb", "roles/l1-researcher", apiScope(identityv1.ScopeKind_SCOPE_KIND_PROJECT, "projects/team-b"))
	ra, rb := workloadv1.NewGovernanceServiceClient(d.conn(t, raToken)), workloadv1.NewGovernanceServiceClient(d.conn(t, rbToken))
	denied := func(what string, resp any, err error) {
		t.Helper()
		apiWant(t, "team-b's researcher "+what, err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
		if strings.Contains(fmt.Sprint(resp)+status.Convert(err).Message(), secret) {
			t.Errorf("team-b's researcher %s: was sent team-a's value: %v %v", what, resp, err)
		}
	}
	reads := map[string]func(g workloadv1.GovernanceServiceClient) (any, error){
		"projects/team-a/environments/jupyter": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.GetEnvironment(t.Context(), &workloadv1.GetEnvironmentRequest{Name: "projects/team-a/environments/jupyter"})
		},
		"departments/dept-a/environments/jupyter": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.GetEnvironment(t.Context(), &workloadv1.GetEnvironmentRequest{Name: "departments/dept-a/environments/jupyter"})
		},
		"projects/team-a/computeResources/big": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.GetComputeResource(t.Context(), &workloadv1.GetComputeResourceRequest{Name: "projects/team-a/computeResources/big"})
		},
		"departments/dept-a/computeResources/big": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.GetComputeResource(t.Context(), &workloadv1.GetComputeResourceRequest{Name: "departments/dept-a/computeResources/big"})
		},
		"projects/team-a/templates/nightly": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.GetTemplate(t.Context(), &workloadv1.GetTemplateRequest{Name: "projects/team-a/templates/nightly"})
		},
		"departments/dept-a/templates/nightly": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.GetTemplate(t.Context(), &workloadv1.GetTemplateRequest{Name: "departments/dept-a/templates/nightly"})
		},
		"the templates of projects/team-a": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.ListTemplates(t.Context(), &workloadv1.ListTemplatesRequest{Parent: "projects/team-a"})
		},
		"the templates of departments/dept-a": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.ListTemplates(t.Context(), &workloadv1.ListTemplatesRequest{Parent: "departments/dept-a"})
		},
		"projects/team-a/policies/training": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.GetPolicy(t.Context(), &workloadv1.GetPolicyRequest{Name: "projects/team-a/policies/training"})
		},
		"projects/team-a/policies/training:effective": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.GetEffectivePolicy(t.Context(), &workloadv1.GetEffectivePolicyRequest{Name: "projects/team-a/policies/training"})
		},
		"the environments of projects/team-a": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.ListEnvironments(t.Context(), &workloadv1.ListEnvironmentsRequest{Parent: "projects/team-a"})
		},
		"the environments of departments/dept-a": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.ListEnvironments(t.Context(), &workloadv1.ListEnvironmentsRequest{Parent: "departments/dept-a"})
		},
		"the compute resources of projects/team-a": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.ListComputeResources(t.Context(), &workloadv1.ListComputeResourcesRequest{Parent: "projects/team-a"})
		},
		"the compute resources of departments/dept-a": func(g workloadv1.GovernanceServiceClient) (any, error) {
			return g.ListComputeResources(t.Context(), &workloadv1.ListComputeResourcesRequest{Parent: "departments/dept-a"})
		},
	}
	for what, read := range reads {
		resp, err := read(rb)
		denied("reads "+what, resp, err)
		if resp, err := read(ra); err != nil || !strings.Contains(fmt.Sprint(resp), secret) && !strings.Contains(what, "effective") {
			t.Errorf("team-a's researcher reads %s: %v, %v", what, resp, err)
		}
	}
	// What team-b may list holds nothing of team-a's or dept-a's.
	for _, parent := range []string{"", "projects/team-b", "departments/dept-b"} {
		envs, err := rb.ListEnvironments(t.Context(), &workloadv1.ListEnvironmentsRequest{Parent: parent})
		if err != nil || strings.Contains(fmt.Sprint(envs), secret) || strings.Contains(fmt.Sprint(envs), "-a/") {
			t.Errorf("team-b's researcher lists the environments of %q: %v, %v, want none of team-a's or dept-a's", parent, envs, err)
		}
		crs, err := rb.ListComputeResources(t.Context(), &workloadv1.ListComputeResourcesRequest{Parent: parent})
		if err != nil || strings.Contains(fmt.Sprint(crs), secret) || strings.Contains(fmt.Sprint(crs), "-a/") {
			t.Errorf("team-b's researcher lists the compute resources of %q: %v, %v, want none of team-a's or dept-a's", parent, crs, err)
		}
		tps, err := rb.ListTemplates(t.Context(), &workloadv1.ListTemplatesRequest{Parent: parent})
		if err != nil || strings.Contains(fmt.Sprint(tps), secret) || strings.Contains(fmt.Sprint(tps), "-a/") {
			t.Errorf("team-b's researcher lists the templates of %q: %v, %v, want none of team-a's or dept-a's", parent, tps, err)
		}
	}
	// A page token of team-a's researcher's listing opens nothing for
	// team-b's, on team-a's scope or its own.
	page, err := ra.ListEnvironments(t.Context(), &workloadv1.ListEnvironmentsRequest{Parent: "projects/team-a", PageSize: 1})
	if err != nil || page.GetNextPageToken() == "" {
		t.Fatalf("team-a's researcher lists a page of team-a's environments: %v, %v", page, err)
	}
	stolen, err := rb.ListEnvironments(t.Context(), &workloadv1.ListEnvironmentsRequest{Parent: "projects/team-a", PageToken: page.GetNextPageToken()})
	denied("lists team-a's environments with team-a's page token", stolen, err)
	stolen, err = rb.ListEnvironments(t.Context(), &workloadv1.ListEnvironmentsRequest{Parent: "projects/team-b", PageToken: page.GetNextPageToken()})
	apiWant(t, "team-b's researcher lists its own with team-a's page token", err, codes.InvalidArgument, commonv1.ErrorReason_INVALID_PAGE_TOKEN)
	if len(stolen.GetEnvironments()) != 0 {
		t.Errorf("team-a's page token listed %v for team-b", stolen)
	}
	// Naming them in a submission to team-b neither uses nor reveals them.
	wl := workloadv1.NewWorkloadServiceClient(d.conn(t, rbToken))
	for i, ref := range [][3]string{{"projects/team-a/environments/jupyter", "", ""}, {"departments/dept-a/environments/jupyter", "", ""},
		{"jupyter", "", ""}, {"", "projects/team-a/computeResources/big", ""}, {"", "departments/dept-a/computeResources/big", ""}, {"", "big", ""},
		{"", "", "projects/team-a/templates/nightly"}, {"", "", "departments/dept-a/templates/nightly"}, {"", "", "nightly"}} {
		w, err := wl.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-b", WorkloadId: fmt.Sprintf("w%d", i),
			Environment: ref[0], ComputeResource: ref[1], Template: ref[2], Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
				Spec: &workloadv1.WorkloadSpec{Image: "busybox", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}})
		if code := status.Code(err); code != codes.InvalidArgument && code != codes.NotFound || strings.Contains(fmt.Sprint(w)+status.Convert(err).Message(), secret) {
			t.Errorf("team-b's researcher submits with %q: %v, %v, want INVALID_ARGUMENT or NOT_FOUND and nothing of team-a's", ref, w, err)
		}
	}
	// The REST gateway asks the same guard.
	client := &http.Client{Timeout: 10 * time.Second}
	for _, path := range []string{"/v1/projects/team-a/environments/jupyter", "/v1/departments/dept-a/environments/jupyter",
		"/v1/projects/team-a/environments", "/v1/environments?parent=projects/team-a", "/v1/departments/dept-a/computeResources",
		"/v1/projects/team-a/computeResources/big", "/v1/projects/team-a/templates/nightly", "/v1/departments/dept-a/templates",
		"/v1/templates?parent=departments/dept-a", "/v1/projects/team-a/policies/training", "/v1/projects/team-a/policies/training:effective"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+rbToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || strings.Contains(string(body), secret) {
			t.Errorf("GET %s as team-b's researcher: %d %s, want 403 and nothing of team-a's", path, resp.StatusCode, body)
		}
	}
}
