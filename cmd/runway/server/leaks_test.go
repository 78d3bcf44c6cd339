package server_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// Page tokens are opaque (nothing of the store's key shows) and bound to
// the caller and the query: another caller, or the same caller with another
// filter, gets INVALID_PAGE_TOKEN; the caller who got it reads the next page.
func TestPageTokensOpaqueAndBound(t *testing.T) {
	tn := startTenancy(t)
	alice := workloadv1.NewWorkloadServiceClient(tn.conn(t, tn.member(t, "alice", "roles/viewer",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT})))
	admin := workloadv1.NewWorkloadServiceClient(tn.admin)
	first, err := admin.ListWorkloads(t.Context(), &workloadv1.ListWorkloadsRequest{Parent: "projects/-", PageSize: 1})
	if err != nil || first.GetNextPageToken() == "" {
		t.Fatalf("first page: %v, %v", first, err)
	}
	tok := first.GetNextPageToken()
	_, body, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body)
	for _, leak := range []string{"team-", "workloads", "/runway/"} {
		if strings.Contains(tok, leak) || strings.Contains(string(raw), leak) {
			t.Errorf("the page token %q shows %q", tok, leak)
		}
	}
	// Forged: one byte of the sealed body changed (changing the last
	// characters of the text may leave its bytes as they were, since a
	// final base64 character can carry bits that decode to nothing).
	forgedRaw := []byte(raw)
	forgedRaw[len(forgedRaw)-1] ^= 0xff
	kid, _, _ := strings.Cut(tok, ".")
	forged := kid + "." + base64.RawURLEncoding.EncodeToString(forgedRaw)
	for what, req := range map[string]struct {
		c   workloadv1.WorkloadServiceClient
		req *workloadv1.ListWorkloadsRequest
	}{
		"another caller": {alice, &workloadv1.ListWorkloadsRequest{Parent: "projects/-", PageSize: 1, PageToken: tok}},
		"another query":  {admin, &workloadv1.ListWorkloadsRequest{Parent: "projects/team-a", PageSize: 1, PageToken: tok}},
		"a forged token": {admin, &workloadv1.ListWorkloadsRequest{Parent: "projects/-", PageSize: 1, PageToken: forged}},
	} {
		_, err := req.c.ListWorkloads(t.Context(), req.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "page token") {
			t.Errorf("the page token with %s: %v, want INVALID_PAGE_TOKEN", what, err)
		}
	}
	second, err := admin.ListWorkloads(t.Context(), &workloadv1.ListWorkloadsRequest{Parent: "projects/-", PageSize: 2, PageToken: tok})
	if err != nil || len(second.GetWorkloads()) != 2 || second.GetWorkloads()[0].GetName() == first.GetWorkloads()[0].GetName() {
		t.Errorf("the next page: %v, %v", second, err)
	}
}

// A node's description names the workloads holding its GPUs only to those
// who may view them; others see that a GPU is held, not by what.
func TestNodeDescribeHidesOtherProjectsWorkloads(t *testing.T) {
	tn := startTenancyWith(t, func(c *server.DevConfig) { c.Nodes, c.GPUsPerNode = 1, 1 })
	w := training("projects/team-b", "gpu-b")
	w.Workload.Spec.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}
	if _, err := workloadv1.NewWorkloadServiceClient(tn.admin).CreateWorkload(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	holder := func(c nodemanagerv1.NodeManagerServiceClient) (string, error) {
		n, err := c.GetNode(t.Context(), &nodemanagerv1.GetNodeRequest{Name: "nodes/node-1"})
		if err != nil {
			return "", err
		}
		for _, d := range n.GetDevices() {
			for _, a := range d.GetAllocations() {
				return a.GetWorkload(), nil
			}
		}
		return "", status.Error(codes.Unavailable, "no allocation yet")
	}
	admin := nodemanagerv1.NewNodeManagerServiceClient(tn.admin)
	eventuallyOK(t, "gpu-b on node-1", func() error {
		got, err := holder(admin)
		if err == nil && got != "projects/team-b/workloads/gpu-b" {
			return status.Errorf(codes.Internal, "holder %q", got)
		}
		return err
	})
	alice := nodemanagerv1.NewNodeManagerServiceClient(tn.conn(t, tn.member(t, "alice", "roles/l1-researcher",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})))
	if got, err := holder(alice); err != nil || got != "projects/-/workloads/-" {
		t.Errorf("team-a's researcher sees the GPU held by %q (%v), want it hidden", got, err)
	}
	bob := nodemanagerv1.NewNodeManagerServiceClient(tn.conn(t, tn.member(t, "bob", "roles/viewer",
		&identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-b"})))
	if got, err := holder(bob); err != nil || got != "projects/team-b/workloads/gpu-b" {
		t.Errorf("team-b's viewer sees the GPU held by %q (%v)", got, err)
	}
	l, err := alice.ListNodes(t.Context(), &nodemanagerv1.ListNodesRequest{})
	if err != nil || strings.Contains(l.String(), "gpu-b") {
		t.Errorf("team-a's researcher lists nodes: %v, %v", l, err)
	}
}

// The audit log's peer address is the real one: an X-Forwarded-For a client
// sends, over REST or as gRPC metadata, is not believed (no proxy is
// configured).
func TestAuditPeerNotSpoofed(t *testing.T) {
	tn := startTenancy(t)
	token := tokenOf(t, tn)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+tn.addr+"/v1/departments?departmentId=rest-dept",
		strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-forwarded-for", "198.51.100.7")
	if _, err := quotav1.NewQuotaServiceClient(tn.admin).CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: "grpc-dept",
		Department: &quotav1.Department{}}); err != nil {
		t.Fatal(err)
	}
	ids := identityv1.NewIdentityServiceClient(tn.admin)
	eventuallyOK(t, "both events", func() error {
		r, err := ids.ListAuditEvents(t.Context(), &identityv1.ListAuditEventsRequest{Filter: `method = "/runway.quota.v1.QuotaService/CreateDepartment"`})
		if err != nil {
			return err
		}
		seen := 0
		for _, ev := range r.GetAuditEvents() {
			if ev.GetResource() != "departments/rest-dept" && ev.GetResource() != "departments/grpc-dept" || ev.GetOutcomeUnknown() {
				continue
			}
			seen++
			if !strings.HasPrefix(ev.GetPeerAddress(), "127.0.0.1:") {
				t.Fatalf("%s was recorded from %q, want the real 127.0.0.1 peer", ev.GetResource(), ev.GetPeerAddress())
			}
		}
		if seen != 2 {
			return status.Errorf(codes.NotFound, "%d of 2 events", seen)
		}
		return nil
	})
}
