package workload_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/services/workload"
)

// quotaAnswer is a QuotaServiceClient whose GetProject answers with a fixed
// error: enough to check how QuotaProjects reads the quota service's
// answers, without a server.
type quotaAnswer struct {
	quotav1.QuotaServiceClient // other methods are not called
	err                        error
	asked                      string
}

func (q *quotaAnswer) GetProject(_ context.Context, req *quotav1.GetProjectRequest, _ ...grpc.CallOption) (*quotav1.Project, error) {
	q.asked = req.GetName()
	if q.err != nil {
		return nil, q.err
	}
	return &quotav1.Project{Name: req.GetName()}, nil
}

func TestQuotaProjects(t *testing.T) {
	quotaNotFound := apierr.ToStatus(apierr.NotFound(apierr.Project, "projects/nope"), "quota.runway.dev").Err()
	unavailable := status.Error(codes.Unavailable, "connection refused")
	for name, tc := range map[string]struct {
		answer     error
		wantCode   codes.Code
		wantReason string
	}{
		"a project that exists":                                 {nil, codes.OK, ""},
		"a missing project is this service's PROJECT_NOT_FOUND": {quotaNotFound, codes.NotFound, commonv1.ErrorReason_PROJECT_NOT_FOUND.String()},
		"an unreachable quota service passes through":           {unavailable, codes.Unavailable, ""},
	} {
		t.Run(name, func(t *testing.T) {
			q := &quotaAnswer{err: tc.answer}
			err := workload.QuotaProjects{Client: q}.ProjectExists(t.Context(), "projects/nope")
			if q.asked != "projects/nope" {
				t.Errorf("asked for %q, want projects/nope", q.asked)
			}
			st := apierr.ToStatus(err, "workload.runway.dev")
			if st.Code() != tc.wantCode || apierr.Reason(st.Err()) != tc.wantReason {
				t.Fatalf("status %v %q, want %v %q", st.Code(), apierr.Reason(st.Err()), tc.wantCode, tc.wantReason)
			}
			if tc.wantReason != "" {
				if info := apierr.Info(st.Err()); info.GetDomain() != "workload.runway.dev" || info.GetMetadata()["project"] != "projects/nope" {
					t.Errorf("ErrorInfo %v, want the workload domain and project metadata", info)
				}
			}
		})
	}
}

// TestStoredProjects: the service reads projects and departments where the
// quota service stores them, at each call: a project or department just
// written is found, a deleted one is PROJECT_NOT_FOUND /
// DEPARTMENT_NOT_FOUND at once (CreateWorkload refuses it), and a name that
// is not a project's is not read.
func TestStoredProjects(t *testing.T) {
	e := start(t)
	ctx := t.Context()
	sp := workload.NewStoredProjects(e.etcd.Client, nil)
	if _, err := sp.Project(ctx, "projects/team-a"); apierr.Reason(err) != commonv1.ErrorReason_PROJECT_NOT_FOUND.String() {
		t.Fatalf("a project not written yet: %v, want PROJECT_NOT_FOUND", err)
	}
	e.addOrg(t, map[string]string{"team-a": "ml"}, &quotav1.SchedulingRules{
		WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, NodeTypes: []string{"h100"}})
	p, err := sp.Project(ctx, "projects/team-a")
	if err != nil || p.GetDepartment() != "departments/ml" {
		t.Fatalf("Project = %v, %v; want team-a in departments/ml", p, err)
	}
	d, err := sp.Department(ctx, "departments/ml")
	if err != nil || d.GetName() != "departments/ml" {
		t.Fatalf("Department = %v, %v; want ml", d, err)
	}
	// The project's rule applies to a workload created now.
	w := training()
	w.Spec.NodeType = "a100"
	_, err = e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "w1", Workload: w})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")

	if _, err := e.projects.Delete(ctx, "team-a", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.depts.Delete(ctx, "ml", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Project(ctx, "projects/team-a"); apierr.Reason(err) != commonv1.ErrorReason_PROJECT_NOT_FOUND.String() {
		t.Errorf("a deleted project: %v, want PROJECT_NOT_FOUND", err)
	}
	if _, err := sp.Department(ctx, "departments/ml"); apierr.Reason(err) != commonv1.ErrorReason_DEPARTMENT_NOT_FOUND.String() {
		t.Errorf("a deleted department: %v, want DEPARTMENT_NOT_FOUND", err)
	}
	_, err = e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "w2", Workload: training()})
	wantError(t, err, codes.NotFound, "PROJECT_NOT_FOUND")
	for _, name := range []string{"team-a", "projects/team-a/x", "projects/../team-a", "departments/ml"} {
		if _, err := sp.Project(ctx, name); apierr.Reason(err) != commonv1.ErrorReason_PROJECT_NOT_FOUND.String() {
			t.Errorf("Project(%q): %v, want PROJECT_NOT_FOUND without a read", name, err)
		}
	}
}
