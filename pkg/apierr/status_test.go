package apierr_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

const domain = "quota.runway.dev"

func info(reason string, md map[string]string) *errdetails.ErrorInfo {
	return &errdetails.ErrorInfo{Reason: reason, Domain: domain, Metadata: md}
}

func TestToStatus(t *testing.T) {
	for name, tc := range map[string]struct {
		err         error
		wantCode    codes.Code
		wantDetails []proto.Message
	}{
		"a missing project is NotFound with its name in the metadata": {
			err:         apierr.NotFound(apierr.Project, "projects/team-a"),
			wantCode:    codes.NotFound,
			wantDetails: []proto.Message{info("PROJECT_NOT_FOUND", map[string]string{"project": "projects/team-a"})},
		},
		"wrapping with %w does not change the mapping": {
			err:         fmt.Errorf("get quota: %w", fmt.Errorf("store: %w", apierr.NotFound(apierr.NodePool, "nodepools/a100"))),
			wantCode:    codes.NotFound,
			wantDetails: []proto.Message{info("NODE_POOL_NOT_FOUND", map[string]string{"nodePool": "nodepools/a100"})},
		},
		"a taken workload id is AlreadyExists": {
			err:      apierr.AlreadyExists(apierr.Workload, "projects/a/workloads/w"),
			wantCode: codes.AlreadyExists,
			wantDetails: []proto.Message{
				info("WORKLOAD_ALREADY_EXISTS", map[string]string{"workload": "projects/a/workloads/w"}),
			},
		},
		"a bad field is InvalidArgument with a BadRequest": {
			err:      apierr.InvalidField("project_id", "must be 1-63 characters of [a-z0-9-] starting with a letter"),
			wantCode: codes.InvalidArgument,
			wantDetails: []proto.Message{
				info("INVALID_FIELD", map[string]string{"field": "project_id"}),
				&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
					{Field: "project_id", Description: "must be 1-63 characters of [a-z0-9-] starting with a letter"},
				}},
			},
		},
		"every bad field is listed at once": {
			err: apierr.Invalid(
				apierr.FieldViolation{Field: "workload.spec.pods", Description: "must be at least 1"},
				apierr.FieldViolation{Field: "workload.spec.image", Description: "is required"},
			),
			wantCode: codes.InvalidArgument,
			wantDetails: []proto.Message{
				info("INVALID_FIELD", map[string]string{"field": "workload.spec.pods,workload.spec.image"}),
				&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
					{Field: "workload.spec.pods", Description: "must be at least 1"},
					{Field: "workload.spec.image", Description: "is required"},
				}},
			},
		},
		"an unknown role is InvalidArgument and can name its field": {
			err:      apierr.NotFound(apierr.Role, "roles/wizard").InField("access_rule.role"),
			wantCode: codes.InvalidArgument,
			wantDetails: []proto.Message{
				info("ROLE_NOT_FOUND", map[string]string{"role": "roles/wizard"}),
				&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
					{Field: "access_rule.role", Description: `Role "roles/wizard" does not exist; check the name.`},
				}},
			},
		},
		"an immutable field in the update mask is InvalidArgument": {
			err:      apierr.ImmutableField("project.uid"),
			wantCode: codes.InvalidArgument,
			wantDetails: []proto.Message{
				info("IMMUTABLE_FIELD", map[string]string{"field": "project.uid"}),
				&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
					{Field: "update_mask", Description: `"project.uid" is output only, immutable or unknown`},
				}},
			},
		},
		"a forbidden state change is FailedPrecondition with a PreconditionFailure": {
			err: apierr.FailedPrecondition(commonv1.ErrorReason_INVALID_STATE_TRANSITION, "projects/a/workloads/w",
				`Workload "projects/a/workloads/w" is "COMPLETED" and cannot be suspended; submit a new one.`).
				With("phase", "COMPLETED"),
			wantCode: codes.FailedPrecondition,
			wantDetails: []proto.Message{
				info("INVALID_STATE_TRANSITION", map[string]string{"name": "projects/a/workloads/w", "phase": "COMPLETED"}),
				&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{
					Type:        "INVALID_STATE_TRANSITION",
					Subject:     "projects/a/workloads/w",
					Description: `Workload "projects/a/workloads/w" is "COMPLETED" and cannot be suspended; submit a new one.`,
				}}},
			},
		},
		"the subject key follows the reason": {
			err: apierr.FailedPrecondition(commonv1.ErrorReason_PROJECT_NOT_EMPTY, "projects/a",
				`Project "projects/a" still has "2" workloads; delete them first.`).With("workloadCount", "2"),
			wantCode: codes.FailedPrecondition,
			wantDetails: []proto.Message{
				info("PROJECT_NOT_EMPTY", map[string]string{"project": "projects/a", "workloadCount": "2"}),
				&errdetails.PreconditionFailure{Violations: []*errdetails.PreconditionFailure_Violation{{
					Type: "PROJECT_NOT_EMPTY", Subject: "projects/a",
					Description: `Project "projects/a" still has "2" workloads; delete them first.`,
				}}},
			},
		},
		"a stale etag is Aborted": {
			err:         apierr.EtagMismatch("projects/a", "17"),
			wantCode:    codes.Aborted,
			wantDetails: []proto.Message{info("ETAG_MISMATCH", map[string]string{"name": "projects/a", "etag": "17"})},
		},
		"a hard limit is ResourceExhausted with a QuotaFailure": {
			err: apierr.QuotaExceeded("projects/a", `Project "projects/a" may use at most "2000" milli-GPUs; lower the request.`).
				With("limit", "2000"),
			wantCode: codes.ResourceExhausted,
			wantDetails: []proto.Message{
				info("QUOTA_LIMIT_EXCEEDED", map[string]string{"subject": "projects/a", "limit": "2000"}),
				&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{
					Subject: "projects/a", Description: `Project "projects/a" may use at most "2000" milli-GPUs; lower the request.`,
				}}},
			},
		},
		"a missing permission is PermissionDenied": {
			err:      apierr.PermissionDenied("workloads.create", "projects/a"),
			wantCode: codes.PermissionDenied,
			wantDetails: []proto.Message{
				info("PERMISSION_DENIED", map[string]string{"permission": "workloads.create", "resource": "projects/a"}),
			},
		},
		"no credentials is Unauthenticated": {
			err:         apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_MISSING),
			wantCode:    codes.Unauthenticated,
			wantDetails: []proto.Message{info("CREDENTIALS_MISSING", map[string]string{})},
		},
		"an unreachable store is Unavailable with a RetryInfo and without the cause": {
			err: apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, 2*time.Second).
				WithCause(errors.New("etcdserver: request timed out")),
			wantCode: codes.Unavailable,
			wantDetails: []proto.Message{
				info("STORE_UNAVAILABLE", map[string]string{}),
				&errdetails.RetryInfo{RetryDelay: durationpb.New(2 * time.Second)},
			},
		},
		"cancellation passes through": {
			err:      fmt.Errorf("list: %w", context.Canceled),
			wantCode: codes.Canceled,
		},
		"a deadline passes through": {
			err:      fmt.Errorf("list: %w", context.DeadlineExceeded),
			wantCode: codes.DeadlineExceeded,
		},
		"an error from a service with no reason for it is Internal": {
			err:         apierr.AlreadyExists(apierr.Node, "nodes/n1"),
			wantCode:    codes.Internal,
			wantDetails: []proto.Message{info("INTERNAL_ERROR", map[string]string{})},
		},
		"an unknown error is Internal": {
			err:         errors.New("etcdserver: mvcc: required revision has been compacted"),
			wantCode:    codes.Internal,
			wantDetails: []proto.Message{info("INTERNAL_ERROR", map[string]string{})},
		},
	} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			st := apierr.ToStatus(tc.err, domain, apierr.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if st.Code() != tc.wantCode {
				t.Fatalf("code = %v, want %v (%v)", st.Code(), tc.wantCode, st.Message())
			}
			if diff := cmp.Diff(tc.wantDetails, details(st), protocmp.Transform()); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
			for _, secret := range []string{"etcd", "mvcc", "cause"} {
				if strings.Contains(st.Message(), secret) {
					t.Errorf("message %q leaks %q", st.Message(), secret)
				}
			}
			if tc.wantCode == codes.Internal && !strings.Contains(logs.String(), strconv.Quote(tc.err.Error())) {
				t.Errorf("the cause was not logged; log:\n%s", logs.String())
			}
		})
	}
}

func details(st *status.Status) []proto.Message {
	var out []proto.Message
	for _, d := range st.Details() {
		out = append(out, d.(proto.Message))
	}
	return out
}

func TestToStatus_internalCarriesRequestID(t *testing.T) {
	var logs bytes.Buffer
	st := apierr.ToStatus(errors.New("boom"), domain, apierr.WithRequestID("r-42"),
		apierr.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if got := apierr.Info(st.Err()).GetMetadata()["requestId"]; got != "r-42" {
		t.Errorf("requestId = %q, want r-42", got)
	}
	if !strings.Contains(st.Message(), "r-42") || strings.Contains(st.Message(), "boom") {
		t.Errorf("message = %q: want the request id and not the cause", st.Message())
	}
	if !strings.Contains(logs.String(), "requestId=r-42") || !strings.Contains(logs.String(), "boom") {
		t.Errorf("log lacks the request id or the cause:\n%s", logs.String())
	}
}

func TestToStatus_passesStatusesThrough(t *testing.T) {
	downstream := apierr.ToStatus(apierr.NotFound(apierr.Project, "projects/x"), "quota.runway.dev")
	got := apierr.ToStatus(fmt.Errorf("ask quota: %w", downstream.Err()), "workload.runway.dev")
	if diff := cmp.Diff(downstream.Proto(), got.Proto(), protocmp.Transform()); diff != "" {
		t.Errorf("status changed on the way through (-want +got):\n%s", diff)
	}
	if apierr.ToStatus(nil, domain) != nil {
		t.Error("ToStatus(nil) is not nil")
	}
}

// Every value a message quotes must be in the metadata, because clients
// branch on metadata and the message may change.
func TestConstructors_quoteOnlyMetadata(t *testing.T) {
	q := regexp.MustCompile(`"([^"]*)"`)
	for _, e := range []*apierr.Error{
		apierr.NotFound(apierr.AccessRule, "accessRules/r1"),
		apierr.AlreadyExists(apierr.Department, "departments/d"),
		apierr.InvalidField("a.b", "must be set"),
		apierr.Invalid(apierr.FieldViolation{Field: "a", Description: "x"}, apierr.FieldViolation{Field: "b", Description: "y"}),
		apierr.ImmutableField("project.uid"),
		apierr.InvalidPageToken(),
		apierr.InvalidFilter("phase = X", "unknown phase"),
		apierr.EtagMismatch("projects/a", "3"),
		apierr.EtagMismatch("projects/a", ""),
		apierr.PermissionDenied("projects.delete", "projects/a"),
		apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID),
		apierr.Unavailable(commonv1.ErrorReason_NOT_LEADER, time.Second),
		apierr.Internal("r1"),
		apierr.Internal(""),
	} {
		values := strings.Join(mapValues(e.Metadata()), "\x00")
		for _, m := range q.FindAllStringSubmatch(e.Message(), -1) {
			if !strings.Contains(values, m[1]) {
				t.Errorf("%s: message %q quotes %q, which is not in the metadata %v", e.Reason(), e.Message(), m[1], e.Metadata())
			}
		}
		if keys := apierr.MetadataKeys(e.Reason()); !subset(e.Metadata(), keys) {
			t.Errorf("%s: metadata %v has keys outside %v", e.Reason(), e.Metadata(), keys)
		}
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func subset(md map[string]string, keys []string) bool {
	for k := range md {
		found := false
		for _, want := range keys {
			found = found || k == want
		}
		if !found {
			return false
		}
	}
	return true
}

func TestError_WithCopies(t *testing.T) {
	base := apierr.FailedPrecondition(commonv1.ErrorReason_DEPARTMENT_NOT_EMPTY, "departments/d", "Delete its projects first.")
	_ = base.With("projectCount", "3")
	if _, ok := base.Metadata()["projectCount"]; ok {
		t.Error("With changed the original error")
	}
	cause := context.DeadlineExceeded
	e := apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, 0).WithCause(cause)
	if !errors.Is(e, cause) {
		t.Error("WithCause hides the cause from errors.Is")
	}
	// The typed error wins over the cause it wraps.
	if got := apierr.ToStatus(e, domain).Code(); got != codes.Unavailable {
		t.Errorf("code = %v, want Unavailable", got)
	}
}
