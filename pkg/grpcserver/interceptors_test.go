package grpcserver_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

func TestNotFound_overGRPC(t *testing.T) {
	e := start(t)
	_, err := e.client.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/nope"})
	if got := status.Code(err); got != codes.NotFound {
		t.Fatalf("code = %v, want NotFound (%v)", got, err)
	}
	want := &errdetails.ErrorInfo{
		Reason: "PROJECT_NOT_FOUND", Domain: "quota.runway.dev",
		Metadata: map[string]string{"project": "projects/nope"},
	}
	if diff := cmp.Diff(want, apierr.Info(err), protocmp.Transform()); diff != "" {
		t.Errorf("ErrorInfo (-want +got):\n%s", diff)
	}
	if n := len(status.Convert(err).Details()); n != 1 {
		t.Errorf("%d details, want exactly one ErrorInfo", n)
	}
}

func TestInvalidArgument_overGRPC(t *testing.T) {
	e := start(t)
	_, err := e.client.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: "Team_A"})
	if got := status.Code(err); got != codes.InvalidArgument {
		t.Fatalf("code = %v, want InvalidArgument (%v)", got, err)
	}
	var violations []string
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				violations = append(violations, v.GetField())
			}
		}
	}
	if diff := cmp.Diff([]string{"project_id"}, violations); diff != "" {
		t.Errorf("field violations (-want +got):\n%s", diff)
	}
}

func TestPanic_isInternalAndTheServerKeepsServing(t *testing.T) {
	e := start(t)
	var header metadata.MD
	_, err := e.client.DeleteProject(t.Context(), &quotav1.DeleteProjectRequest{Name: "projects/team-a"}, grpc.Header(&header))
	if got := status.Code(err); got != codes.Internal {
		t.Fatalf("code = %v, want Internal (%v)", got, err)
	}
	if got := apierr.Reason(err); got != "INTERNAL_ERROR" {
		t.Errorf("reason = %q, want INTERNAL_ERROR", got)
	}
	id := apierr.Info(err).GetMetadata()["requestId"]
	if id == "" {
		t.Error("no requestId in the ErrorInfo metadata")
	}
	if msg := status.Convert(err).Message(); strings.Contains(msg, "bug") {
		t.Errorf("message leaks the panic: %q", msg)
	}
	logs := e.logs.String()
	for _, want := range []string{"panic in a call", "the handler has a bug", "requestId=" + id, "fixture_test.go:", "panic=true"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if _, err := e.client.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/team-a"}); err != nil {
		t.Errorf("the next call failed: %v", err)
	}
}

func TestUnknownError_isInternalWithoutItsText(t *testing.T) {
	e := start(t)
	_, err := e.client.GetSettings(t.Context(), &quotav1.GetSettingsRequest{Name: "settings"})
	if got := status.Code(err); got != codes.Internal {
		t.Fatalf("code = %v, want Internal (%v)", got, err)
	}
	if msg := status.Convert(err).Message(); strings.Contains(msg, "etcd") || strings.Contains(msg, "/runway/") {
		t.Errorf("message leaks internals: %q", msg)
	}
	if !strings.Contains(e.logs.String(), "leader changed") {
		t.Errorf("the cause was not logged:\n%s", e.logs.String())
	}
}

func TestRequestID(t *testing.T) {
	e := start(t)
	t.Run("the caller's id is echoed", func(t *testing.T) {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "x-request-id", "req-123")
		var header metadata.MD
		if _, err := e.client.GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/team-a"}, grpc.Header(&header)); err != nil {
			t.Fatal(err)
		}
		if got := header.Get("x-request-id"); len(got) != 1 || got[0] != "req-123" {
			t.Errorf("x-request-id = %v, want [req-123]", got)
		}
		if !strings.Contains(e.logs.String(), "requestId=req-123") {
			t.Error("the access log lacks the request id")
		}
	})
	t.Run("an id is made when there is none or it is unsafe", func(t *testing.T) {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "x-request-id", "a b;c")
		var header metadata.MD
		_, err := e.client.GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/x"}, grpc.Header(&header))
		got := header.Get("x-request-id")
		if len(got) != 1 || got[0] == "" || got[0] == "a b;c" {
			t.Fatalf("x-request-id = %q, want a generated id", got)
		}
		if status.Code(err) != codes.NotFound {
			t.Errorf("code = %v, want NotFound", status.Code(err))
		}
	})
}

func TestAccessLog(t *testing.T) {
	e := start(t)
	_, _ = e.client.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/nope"})
	logs := e.logs.String()
	for _, want := range []string{"msg=rpc", "method=/runway.quota.v1.QuotaService/GetProject", "code=NotFound", "duration=", "reason=PROJECT_NOT_FOUND"} {
		if !strings.Contains(logs, want) {
			t.Errorf("access log lacks %q:\n%s", want, logs)
		}
	}
}

func TestAuthSlot(t *testing.T) {
	e := start(t)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer bad")
	_, err := e.client.GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/team-a"})
	if got := status.Code(err); got != codes.Unauthenticated {
		t.Fatalf("code = %v, want Unauthenticated (%v)", got, err)
	}
	if got := apierr.Info(err); got.GetReason() != "CREDENTIALS_INVALID" || got.GetDomain() != "quota.runway.dev" {
		t.Errorf("ErrorInfo = %v, want CREDENTIALS_INVALID in quota.runway.dev", got)
	}
}

func TestAuthSlot_nilIsSkipped(t *testing.T) {
	e := start(t, func(c *grpcserver.Config) { c.Auth = nil })
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer bad")
	if _, err := e.client.GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/team-a"}); err != nil {
		t.Fatalf("call failed without an auth interceptor: %v", err)
	}
}

func TestDomains_override(t *testing.T) {
	e := start(t, func(c *grpcserver.Config) {
		c.Domains = map[string]string{"runway.quota.v1.QuotaService": "quota.example.test"}
	})
	_, err := e.client.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/nope"})
	if got := apierr.Info(err).GetDomain(); got != "quota.example.test" {
		t.Errorf("domain = %q, want quota.example.test", got)
	}
}

func TestDomainOf(t *testing.T) {
	for service, want := range map[string]string{
		"runway.quota.v1.QuotaService":             "quota.runway.dev",
		"runway.nodemanager.v1.NodeManagerService": "nodemanager.runway.dev",
		"grpc.health.v1.Health":                    "runway.dev",
		"runway.Thing":                             "runway.dev",
	} {
		if got := grpcserver.DomainOf(service); got != want {
			t.Errorf("DomainOf(%q) = %q, want %q", service, got, want)
		}
	}
}
