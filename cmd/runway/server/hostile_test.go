package server_test

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/auth"
)

// ruleScope is a scope the hostile suite grants on or revokes from, with
// where it sits in the fixture's tree.
type ruleScope struct {
	label      string
	scope      *identityv1.Scope
	department string // the department it is in ("" for the account)
}

func (s ruleScope) kind() identityv1.ScopeKind { return s.scope.GetKind() }

var hostileScopes = []ruleScope{
	{"account", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT}, ""},
	{"dept-a", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, Name: "departments/dept-a"}, "dept-a"},
	{"dept-b", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, Name: "departments/dept-b"}, "dept-b"},
	{"team-a", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"}, "dept-a"},
	{"team-b", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-b"}, "dept-b"},
}

// reaches: does the attacker's grant (on g) cover scope s; strictly: is g
// wider than s.
func reaches(g grantScope, s ruleScope) (covers, strictly bool) {
	switch g.label {
	case "account":
		return true, s.label != "account"
	case "department": // dept-a
		return s.department == "dept-a" && s.label != "account", s.kind() == identityv1.ScopeKind_SCOPE_KIND_PROJECT && s.department == "dept-a"
	}
	return s.label == "team-a", false
}

// mayAdminister is the rule, read from the role table: an attacker holding
// mine on g may create (action create) or delete (delete) a rule granting
// target on s when it holds accessrules.<action> there, holds every
// permission of target at least as broadly, and, for a role that
// administers access below the account, from a wider scope.
func mayAdminister(mine *auth.Role, g grantScope, target *auth.Role, s ruleScope, action auth.Action) bool {
	covers, strictly := reaches(g, s)
	if !covers || mine.Grant(auth.Permission{Entity: auth.AccessRules, Action: action}) != auth.All {
		return false
	}
	appoints := target.Grant(auth.Permission{Entity: auth.AccessRules, Action: auth.Create}) != auth.None ||
		target.Grant(auth.Permission{Entity: auth.AccessRules, Action: auth.Delete}) != auth.None
	if appoints && s.label != "account" && !strictly {
		return false
	}
	for _, e := range auth.Entities {
		for _, a := range auth.Actions {
			p := auth.Permission{Entity: e, Action: a}
			need, held := target.Grant(p), mine.Grant(p)
			if need != auth.None && held != auth.All && held != need {
				return false
			}
		}
	}
	return true
}

// attacker is one member of the hostile suite: a role granted on a scope.
type attacker struct {
	role  *auth.Role
	grant grantScope
	ids   identityv1.IdentityServiceClient
	quota quotav1.QuotaServiceClient
}

func (tn *tenancy) attackers(t *testing.T) []attacker {
	var out []attacker
	for _, role := range auth.Roles() {
		for _, g := range grantScopes {
			if !role.Grantable(g.scope.GetKind()) {
				continue
			}
			conn := tn.conn(t, tn.member(t, "x-"+role.ID+"-"+g.label, "roles/"+role.ID, g.scope))
			out = append(out, attacker{role, g, identityv1.NewIdentityServiceClient(conn), quotav1.NewQuotaServiceClient(conn)})
		}
	}
	return out
}

// TestHostileTenant is generated from the role table like the access
// matrix: every role, granted on a project, a department or the account,
// tries to grant every role on every scope, to delete every rule (the
// bootstrap administrator's among them), and to edit quotas up and across
// the department tree; each attempt is refused or allowed exactly as the
// no-escalation rule says, and nothing changes.
func TestHostileTenant(t *testing.T) {
	tn := startTenancy(t)
	admin := identityv1.NewIdentityServiceClient(tn.admin)
	if _, err := admin.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "victim",
		User: &identityv1.User{Email: "victim@example.com", Password: "password of the victim"}}); err != nil {
		t.Fatal(err)
	}
	// One rule for every grantable role on every scope, to be deleted.
	type fixtureRule struct {
		name  string
		role  *auth.Role
		scope ruleScope
	}
	var fixture []fixtureRule
	for _, role := range auth.Roles() {
		for _, s := range hostileScopes {
			if !role.Grantable(s.kind()) {
				continue
			}
			r, err := admin.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
				Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/victim"},
				Role:    "roles/" + role.ID, Scope: s.scope}})
			if err != nil {
				t.Fatalf("CreateAccessRule(%s on %s): %v", role.ID, s.label, err)
			}
			fixture = append(fixture, fixtureRule{r.GetName(), role, s})
		}
	}
	// The bootstrap administrator's own rule.
	sysAdmin, _ := auth.LookupRole("system-admin")
	all, err := admin.ListAccessRules(t.Context(), &identityv1.ListAccessRulesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all.GetAccessRules() {
		if r.GetSubject().GetName() == "users/admin" {
			fixture = append(fixture, fixtureRule{r.GetName(), sysAdmin, hostileScopes[0]})
		}
	}
	before, err := admin.ListAccessRules(t.Context(), &identityv1.ListAccessRulesRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}

	allowedCode := func(what string, err error, want bool, okCodes ...codes.Code) {
		t.Helper()
		code := status.Code(err)
		if got := code != codes.PermissionDenied; got != want {
			t.Errorf("%s: got %v, want allowed=%v", what, err, want)
			return
		}
		if want {
			for _, c := range okCodes {
				if code == c {
					return
				}
			}
			t.Errorf("%s: got %v, want one of %v", what, err, okCodes)
		}
	}
	checked := 0
	for _, at := range tn.attackers(t) {
		who := at.role.ID + " on " + at.grant.label
		// Grant every role on every scope to a user that does not exist:
		// allowed means the handler's NOT_FOUND, after the checks.
		for _, target := range auth.Roles() {
			for _, s := range hostileScopes {
				if !target.Grantable(s.kind()) {
					continue
				}
				_, err := at.ids.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
					Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/nobody"},
					Role:    "roles/" + target.ID, Scope: s.scope}})
				allowedCode(fmt.Sprintf("%s grants %s on %s", who, target.ID, s.label), err,
					mayAdminister(at.role, at.grant, target, s, auth.Create), codes.NotFound)
				checked++
			}
		}
		// Delete every rule with a stale etag: allowed means the etag
		// mismatch, after the checks.
		for _, r := range fixture {
			_, err := at.ids.DeleteAccessRule(t.Context(), &identityv1.DeleteAccessRuleRequest{Name: r.name, Etag: etagStale})
			allowedCode(fmt.Sprintf("%s deletes %s's rule %s on %s", who, r.role.ID, r.name, r.scope.label), err,
				mayAdminister(at.role, at.grant, r.role, r.scope, auth.Delete), codes.Aborted, codes.FailedPrecondition)
			checked++
		}
		// Quotas: a department's quota is raised only from the account; a
		// project moves only into a department where the caller may create
		// projects; a project's quota is its department's business.
		more := []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: proto.Int64(64000)}}}
		quotaMask := &fieldmaskpb.FieldMask{Paths: []string{"node_pool_quotas"}}
		deptEdit := at.role.Grant(auth.Permission{Entity: auth.Departments, Action: auth.Edit}) == auth.All
		projEdit := at.role.Grant(auth.Permission{Entity: auth.Projects, Action: auth.Edit}) == auth.All
		projCreate := at.role.Grant(auth.Permission{Entity: auth.Projects, Action: auth.Create}) == auth.All
		onAcct := at.grant.label == "account"
		onDeptA := onAcct || at.grant.label == "department"
		for _, d := range []string{"dept-a", "dept-b"} {
			_, err := at.quota.UpdateDepartment(t.Context(), &quotav1.UpdateDepartmentRequest{UpdateMask: quotaMask,
				Department: &quotav1.Department{Name: "departments/" + d, Etag: etagStale, NodePoolQuotas: more}})
			allowedCode(fmt.Sprintf("%s raises %s's quota", who, d), err, deptEdit && onAcct, codes.Aborted, codes.FailedPrecondition)
			_, err = at.quota.UpdateDepartment(t.Context(), &quotav1.UpdateDepartmentRequest{
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}},
				Department: &quotav1.Department{Name: "departments/" + d, Etag: etagStale, Description: "mine"}})
			allowedCode(fmt.Sprintf("%s edits %s's description", who, d), err, deptEdit && (onAcct || onDeptA && d == "dept-a"),
				codes.Aborted, codes.FailedPrecondition)
			checked += 2
		}
		reach := func(p string) bool {
			return onAcct || at.grant.label == "department" && departmentOf[p] == "dept-a" || at.grant.label == "project" && p == "team-a"
		}
		for _, mv := range []struct{ project, to string }{{"team-a", "dept-b"}, {"team-b", "dept-a"}, {"team-a2", "dept-a"}} {
			_, err := at.quota.UpdateProject(t.Context(), &quotav1.UpdateProjectRequest{
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"department"}},
				Project:    &quotav1.Project{Name: "projects/" + mv.project, Etag: etagStale, Department: "departments/" + mv.to}})
			same := departmentOf[mv.project] == mv.to
			want := projEdit && reach(mv.project) && (same || projCreate && (onAcct || at.grant.label == "department" && mv.to == "dept-a"))
			allowedCode(fmt.Sprintf("%s moves %s to %s", who, mv.project, mv.to), err, want, codes.Aborted, codes.FailedPrecondition)
			checked++
		}
		for _, p := range []string{"team-a", "team-b"} {
			_, err := at.quota.UpdateProject(t.Context(), &quotav1.UpdateProjectRequest{UpdateMask: quotaMask,
				Project: &quotav1.Project{Name: "projects/" + p, Etag: etagStale, NodePoolQuotas: more}})
			allowedCode(fmt.Sprintf("%s raises %s's quota", who, p), err, projEdit && reach(p), codes.Aborted, codes.FailedPrecondition)
			checked++
		}
	}
	t.Logf("%d attempts checked", checked)

	// Nothing changed: the same rules, departments without quota.
	after, err := admin.ListAccessRules(t.Context(), &identityv1.ListAccessRulesRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range after.GetAccessRules() {
		have[r.GetName()] = true
	}
	for _, r := range before.GetAccessRules() {
		if !have[r.GetName()] {
			t.Errorf("rule %s (%s) was deleted", r.GetName(), r.GetRole())
		}
	}
	for _, d := range []string{"dept-a", "dept-b"} {
		got, err := quotav1.NewQuotaServiceClient(tn.admin).GetDepartment(t.Context(), &quotav1.GetDepartmentRequest{Name: "departments/" + d})
		if err != nil || len(got.GetNodePoolQuotas()) > 0 && got.GetNodePoolQuotas()[0].GetGpu().GetDeservedMilliGpus() == 64000 {
			t.Errorf("%s after the suite: %v, %v", d, got, err)
		}
	}
}

// TestDepartmentAdminCannotEscalate is the report, step by step with
// real writes: a department administrator granted on the account can
// neither make itself a system administrator nor remove the bootstrap
// administrator's rule; a department's administrator cannot raise its own
// department's quota but can still run its projects.
func TestDepartmentAdminCannotEscalate(t *testing.T) {
	tn := startTenancy(t)
	ids := identityv1.NewIdentityServiceClient(tn.conn(t, tn.member(t, "mallory", "roles/department-admin",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT})))
	_, err := ids.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/mallory"},
		Role:    "roles/system-admin", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT}}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("department-admin grants itself system-admin: %v, want PermissionDenied", err)
	}
	rules, err := identityv1.NewIdentityServiceClient(tn.admin).ListAccessRules(t.Context(), &identityv1.ListAccessRulesRequest{
		Filter: `subject.name = "users/admin"`})
	if err != nil || len(rules.GetAccessRules()) != 1 {
		t.Fatalf("the bootstrap administrator's rules: %v, %v", rules, err)
	}
	_, err = ids.DeleteAccessRule(t.Context(), &identityv1.DeleteAccessRuleRequest{Name: rules.GetAccessRules()[0].GetName()})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("department-admin deletes the bootstrap administrator's rule: %v, want PermissionDenied", err)
	}
	// It still grants what it holds: an L1 researcher in team-a.
	if _, err := identityv1.NewIdentityServiceClient(tn.admin).CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "bob",
		User: &identityv1.User{Email: "bob@example.com", Password: "password of bob"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/bob"},
		Role:    "roles/l1-researcher", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"}}}); err != nil {
		t.Errorf("department-admin grants l1-researcher in team-a: %v", err)
	}

	q := quotav1.NewQuotaServiceClient(tn.conn(t, tn.member(t, "dana", "roles/department-admin",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, Name: "departments/dept-a"})))
	more := []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: proto.Int64(8000)}}}
	_, err = q.UpdateDepartment(t.Context(), &quotav1.UpdateDepartmentRequest{Department: &quotav1.Department{
		Name: "departments/dept-a", NodePoolQuotas: more}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("dept-a's administrator raises dept-a's quota: %v, want PermissionDenied", err)
	}
	_, err = q.UpdateProject(t.Context(), &quotav1.UpdateProjectRequest{Project: &quotav1.Project{
		Name: "projects/team-a", Department: "departments/dept-b"}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("dept-a's administrator moves team-a to dept-b: %v, want PermissionDenied", err)
	}
	if _, err := q.UpdateDepartment(t.Context(), &quotav1.UpdateDepartmentRequest{Department: &quotav1.Department{
		Name: "departments/dept-a", Description: "research"}}); err != nil {
		t.Errorf("dept-a's administrator edits dept-a's description: %v", err)
	}
	if _, err := q.UpdateProject(t.Context(), &quotav1.UpdateProjectRequest{Project: &quotav1.Project{
		Name: "projects/team-a", NodePoolQuotas: more[:1]}}); err != nil {
		t.Errorf("dept-a's administrator sets team-a's quota: %v", err)
	}
}
