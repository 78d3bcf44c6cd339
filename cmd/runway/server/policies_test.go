package server_test

import (
	"slices"
	"testing"

	"google.golang.org/grpc"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// TestListPolicies: the administrator sets a policy at the account, both
// departments and all three projects; ListPolicies, through the real
// server and its access checks, gives each caller exactly the policies of
// the scopes she may view, with their scope and type, page by page: an L1
// researcher of team-a the account's, dept-a's and team-a's; a department
// administrator of dept-b the account's, dept-b's and team-b's; the
// administrator all six.
func TestListPolicies(t *testing.T) {
	tn := startTenancy(t)
	g := workloadv1.NewGovernanceServiceClient(tn.admin)
	names := []string{"policies/training", "departments/dept-a/policies/workspace", "departments/dept-b/policies/training",
		"projects/team-a/policies/training", "projects/team-a2/policies/inference", "projects/team-b/policies/training"}
	for _, n := range names {
		if _, err := g.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{AllowMissing: true, Policy: &workloadv1.Policy{Name: n,
			Defaults: &workloadv1.WorkloadSpec{MilliCpu: 500}}}); err != nil {
			t.Fatalf("UpdatePolicy(%s): %v", n, err)
		}
	}
	alice := tn.conn(t, tn.member(t, "alice", "roles/l1-researcher",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"}))
	bob := tn.conn(t, tn.member(t, "bob", "roles/department-admin",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, Name: "departments/dept-b"}))
	for _, tc := range []struct {
		who  string
		conn *grpc.ClientConn
		want []string
	}{
		{"the administrator", tn.admin, []string{"policies/training", "departments/dept-a/policies/workspace",
			"departments/dept-b/policies/training", "projects/team-a/policies/training", "projects/team-a2/policies/inference",
			"projects/team-b/policies/training"}},
		{"alice (team-a)", alice, []string{"policies/training", "departments/dept-a/policies/workspace", "projects/team-a/policies/training"}},
		{"bob (dept-b)", bob, []string{"policies/training", "departments/dept-b/policies/training", "projects/team-b/policies/training"}},
	} {
		got := listAllPolicies(t, workloadv1.NewGovernanceServiceClient(tc.conn))
		var gotNames []string
		for _, p := range got {
			gotNames = append(gotNames, p.GetName())
		}
		if !slices.Equal(gotNames, tc.want) {
			t.Errorf("%s lists %v, want %v", tc.who, gotNames, tc.want)
		}
		for _, p := range got {
			scope, typ := p.GetScope(), p.GetWorkloadType()
			if typ == workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED || scope == "" ||
				(scope == "account") != (p.GetName() == "policies/"+typeID(typ)) ||
				(scope != "account" && p.GetName() != scope+"/policies/"+typeID(typ)) {
				t.Errorf("%s: %s has scope %q and type %v", tc.who, p.GetName(), scope, typ)
			}
		}
	}
}

// listAllPolicies reads every page of ListPolicies, two policies a page.
func listAllPolicies(t *testing.T, g workloadv1.GovernanceServiceClient) []*workloadv1.Policy {
	t.Helper()
	var out []*workloadv1.Policy
	req := &workloadv1.ListPoliciesRequest{PageSize: 2}
	for {
		resp, err := g.ListPolicies(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, resp.GetPolicies()...)
		if resp.GetNextPageToken() == "" {
			return out
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

func typeID(t workloadv1.WorkloadType) string {
	return map[workloadv1.WorkloadType]string{workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE: "workspace",
		workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING: "training", workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE: "inference"}[t]
}
