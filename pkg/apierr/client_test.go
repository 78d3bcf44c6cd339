package apierr_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/runwayhq/runway/pkg/apierr"
)

func TestReason_andIsNotFound(t *testing.T) {
	received := apierr.ToStatus(apierr.NotFound(apierr.Workload, "projects/a/workloads/w"), "workload.runway.dev").Err()
	for name, tc := range map[string]struct {
		err          error
		wantReason   string
		wantNotFound bool
		wantCode     codes.Code
	}{
		"a received status":             {err: received, wantReason: "WORKLOAD_NOT_FOUND", wantNotFound: true, wantCode: codes.NotFound},
		"a wrapped received status":     {err: fmt.Errorf("describe: %w", received), wantReason: "WORKLOAD_NOT_FOUND", wantNotFound: true, wantCode: codes.NotFound},
		"an unmapped domain error":      {err: apierr.NotFound(apierr.Project, "projects/a"), wantReason: "PROJECT_NOT_FOUND", wantNotFound: true, wantCode: codes.NotFound},
		"a role is not a NotFound code": {err: apierr.NotFound(apierr.Role, "roles/x"), wantReason: "ROLE_NOT_FOUND", wantCode: codes.InvalidArgument},
		"a status without ErrorInfo":    {err: status.Error(codes.NotFound, "gone"), wantNotFound: true, wantCode: codes.NotFound},
		"a plain error":                 {err: errors.New("x"), wantCode: codes.Unknown},
		"no error":                      {err: nil, wantCode: codes.OK},
	} {
		t.Run(name, func(t *testing.T) {
			if got := apierr.Reason(tc.err); got != tc.wantReason {
				t.Errorf("Reason = %q, want %q", got, tc.wantReason)
			}
			if got := apierr.IsNotFound(tc.err); got != tc.wantNotFound {
				t.Errorf("IsNotFound = %v, want %v", got, tc.wantNotFound)
			}
			if got := apierr.Code(tc.err); got != tc.wantCode {
				t.Errorf("Code = %v, want %v", got, tc.wantCode)
			}
		})
	}
	if got := apierr.Info(received).GetMetadata()["workload"]; got != "projects/a/workloads/w" {
		t.Errorf("metadata workload = %q", got)
	}
}
