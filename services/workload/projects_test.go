package workload_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
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
