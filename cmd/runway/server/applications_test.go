package server_test

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// appLogin signs an application in with its client credentials.
func (tn *tenancy) appLogin(t *testing.T, a *identityv1.Application) (string, error) {
	t.Helper()
	r, err := identityv1.NewIdentityServiceClient(tn.admin).Login(t.Context(), &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_ClientCredentials{ClientCredentials: &identityv1.ClientCredentials{
			ClientId: a.GetClientId(), ClientSecret: a.GetClientSecret()}}})
	return r.GetAccessToken(), err
}

func workloadNames(t *testing.T, w workloadv1.WorkloadServiceClient) []string {
	t.Helper()
	l, err := w.ListWorkloads(t.Context(), &workloadv1.ListWorkloadsRequest{Parent: "projects/-"})
	if err != nil {
		t.Fatalf("ListWorkloads: %v", err)
	}
	var out []string
	for _, x := range l.GetWorkloads() {
		out = append(out, x.GetName())
	}
	slices.Sort(out)
	return out
}

// The report: an application an administrator creates for CI and
// grants "l1-researcher in team-a" acts with that rule only, not with its
// creator's system-admin rule.
func TestManagedApplicationHoldsOnlyItsRules(t *testing.T) {
	tn := startTenancy(t)
	admin := identityv1.NewIdentityServiceClient(tn.admin)
	ci, err := admin.CreateApplication(t.Context(), &identityv1.CreateApplicationRequest{ApplicationId: "ci",
		Application: &identityv1.Application{Kind: identityv1.ApplicationKind_APPLICATION_KIND_MANAGED}})
	if err != nil || ci.GetKind() != identityv1.ApplicationKind_APPLICATION_KIND_MANAGED {
		t.Fatalf("CreateApplication(managed) = %v, %v", ci, err)
	}
	if _, err := admin.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_APPLICATION, Name: "applications/ci"},
		Role:    "roles/l1-researcher", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"}}}); err != nil {
		t.Fatal(err)
	}
	var token string
	eventuallyOK(t, "the application's sign-in", func() error {
		token, err = tn.appLogin(t, ci)
		return err
	})
	conn := tn.conn(t, token)
	c, err := identityv1.NewIdentityServiceClient(conn).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
	if err != nil || len(c.GetAccessRules()) != 1 || c.GetAccessRules()[0].GetRole() != "roles/l1-researcher" {
		t.Fatalf("the application's rules: %v, %v", c, err)
	}
	w := workloadv1.NewWorkloadServiceClient(conn)
	if got := workloadNames(t, w); !slices.Equal(got, []string{"projects/team-a/workloads/wa"}) {
		t.Errorf("the application lists %v, want team-a's only", got)
	}
	_, err = w.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-b/workloads/wb"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("the application describes team-b's workload: %v", err)
	}
	_, err = schedulerv1.NewSchedulerServiceClient(conn).ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{Name: "projects/team-b/workloads/wb"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("the application explains team-b's workload: %v", err)
	}
	_, err = identityv1.NewIdentityServiceClient(conn).ListUsers(t.Context(), &identityv1.ListUsersRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("the application lists users: %v", err)
	}

	// A department administrator holds applications.* on its own only: it
	// can neither create an application under Access nor touch this one.
	dana := identityv1.NewIdentityServiceClient(tn.conn(t, tn.member(t, "dana", "roles/department-admin",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT})))
	_, err = dana.CreateApplication(t.Context(), &identityv1.CreateApplicationRequest{ApplicationId: "dana-ci",
		Application: &identityv1.Application{Kind: identityv1.ApplicationKind_APPLICATION_KIND_MANAGED}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("department-admin creates a managed application: %v", err)
	}
	for what, err := range map[string]error{
		"GetApplication": func() error {
			_, err := dana.GetApplication(t.Context(), &identityv1.GetApplicationRequest{Name: "applications/ci"})
			return err
		}(),
		"RegenerateApplicationSecret": func() error {
			_, err := dana.RegenerateApplicationSecret(t.Context(), &identityv1.RegenerateApplicationSecretRequest{Name: "applications/ci"})
			return err
		}(),
		"DeleteApplication": func() error {
			_, err := dana.DeleteApplication(t.Context(), &identityv1.DeleteApplicationRequest{Name: "applications/ci"})
			return err
		}(),
	} {
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("department-admin %s on the managed application: %v", what, err)
		}
	}
}

// A user application acts with its creator's access and nothing else: rules
// cannot name it, it ends with its creator, and a user re-created with the
// same id does not get it back.
func TestUserApplicationActsAsItsCreator(t *testing.T) {
	tn := startTenancy(t)
	alice := identityv1.NewIdentityServiceClient(tn.conn(t, tn.member(t, "alice", "roles/l1-researcher",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})))
	app, err := alice.CreateApplication(t.Context(), &identityv1.CreateApplicationRequest{ApplicationId: "alice-ci",
		Application: &identityv1.Application{}})
	if err != nil || app.GetKind() != identityv1.ApplicationKind_APPLICATION_KIND_USER {
		t.Fatalf("CreateApplication = %v, %v", app, err)
	}
	admin := identityv1.NewIdentityServiceClient(tn.admin)
	_, err = admin.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_APPLICATION, Name: "applications/alice-ci"},
		Role:    "roles/viewer", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT}}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a rule naming a user application: %v, want InvalidArgument", err)
	}
	var token string
	eventuallyOK(t, "the application's sign-in", func() error {
		token, err = tn.appLogin(t, app)
		return err
	})
	w := workloadv1.NewWorkloadServiceClient(tn.conn(t, token))
	if got := workloadNames(t, w); !slices.Equal(got, []string{"projects/team-a/workloads/wa"}) {
		t.Errorf("alice's application lists %v, want what alice sees", got)
	}

	// Alice goes: her application and its tokens go with her.
	if _, err := admin.DeleteUser(t.Context(), &identityv1.DeleteUserRequest{Name: "users/alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.GetApplication(t.Context(), &identityv1.GetApplicationRequest{Name: "applications/alice-ci"}); status.Code(err) != codes.NotFound {
		t.Errorf("alice's application after alice is deleted: %v, want NotFound", err)
	}
	eventuallyOK(t, "the application's token refused", func() error {
		_, err := w.ListWorkloads(t.Context(), &workloadv1.ListWorkloadsRequest{Parent: "projects/-"})
		if status.Code(err) != codes.Unauthenticated {
			return status.Errorf(codes.Internal, "ListWorkloads: %v", err)
		}
		return nil
	})
	// A new alice, with the same id and the same rules, has no application.
	tn.member(t, "alice", "roles/l1-researcher", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})
	if _, err := tn.appLogin(t, app); status.Code(err) != codes.Unauthenticated {
		t.Errorf("the old application's sign-in after alice is re-created: %v, want Unauthenticated", err)
	}
}

// A user deleted and created again under the same id is another user: the
// workloads of the first are not its own (the creator's uid is compared,
// not only the name).
func TestRecreatedUserOwnsNothingOfTheFirst(t *testing.T) {
	tn := startTenancy(t)
	scope := &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"}
	first := workloadv1.NewWorkloadServiceClient(tn.conn(t, tn.member(t, "alice", "roles/l1-researcher", scope)))
	old, err := first.CreateWorkload(t.Context(), training("projects/team-a", "old"))
	if err != nil || old.GetCreator() != "users/alice" || old.GetCreatorUid() == "" {
		t.Fatalf("CreateWorkload = %v, %v; want a creator and its uid", old, err)
	}
	admin := identityv1.NewIdentityServiceClient(tn.admin)
	if _, err := admin.DeleteUser(t.Context(), &identityv1.DeleteUserRequest{Name: "users/alice"}); err != nil {
		t.Fatal(err)
	}
	second := workloadv1.NewWorkloadServiceClient(tn.conn(t, tn.member(t, "alice", "roles/l1-researcher", scope)))
	if _, err := second.SuspendWorkload(t.Context(), &workloadv1.SuspendWorkloadRequest{Name: old.GetName()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the new alice suspends the first's workload: %v, want PermissionDenied", err)
	}
	if _, err := second.DeleteWorkload(t.Context(), &workloadv1.DeleteWorkloadRequest{Name: old.GetName()}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the new alice deletes the first's workload: %v, want PermissionDenied", err)
	}
	mine, err := second.CreateWorkload(t.Context(), training("projects/team-a", "new"))
	if err != nil || mine.GetCreatorUid() == old.GetCreatorUid() {
		t.Fatalf("CreateWorkload = %v, %v; want another creator uid than %s", mine, err, old.GetCreatorUid())
	}
	if _, err := second.DeleteWorkload(t.Context(), &workloadv1.DeleteWorkloadRequest{Name: mine.GetName()}); err != nil {
		t.Errorf("the new alice deletes her own workload: %v", err)
	}
}
