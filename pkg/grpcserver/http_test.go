package grpcserver_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/runwayhq/runway/pkg/grpcserver"
)

// restError decodes the gateway's standard error body and checks it has
// exactly the keys code, message and details.
func restError(t *testing.T, body []byte) *spb.Status {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if diff := cmp.Diff([]string{"code", "details", "message"}, keys); diff != "" {
		t.Errorf("body keys (-want +got):\n%s", diff)
	}
	st := &spb.Status{}
	if err := protojson.Unmarshal(body, st); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	return st
}

func restDetails(t *testing.T, st *spb.Status) []proto.Message {
	t.Helper()
	var out []proto.Message
	for _, a := range st.GetDetails() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestREST_errors(t *testing.T) {
	e := start(t)
	for name, tc := range map[string]struct {
		method, path, body string
		header             http.Header
		wantHTTP           int
		wantCode           codes.Code
		wantDetails        []proto.Message
	}{
		"a missing project is 404 with its ErrorInfo": {
			method: "GET", path: "/v1/projects/nope",
			wantHTTP: http.StatusNotFound, wantCode: codes.NotFound,
			wantDetails: []proto.Message{&errdetails.ErrorInfo{
				Reason: "PROJECT_NOT_FOUND", Domain: "quota.runway.dev",
				Metadata: map[string]string{"project": "projects/nope"},
			}},
		},
		"a bad id is 400 with its field violation": {
			method: "POST", path: "/v1/projects?projectId=Team_A", body: `{"description":"x"}`,
			wantHTTP: http.StatusBadRequest, wantCode: codes.InvalidArgument,
			wantDetails: []proto.Message{
				&errdetails.ErrorInfo{
					Reason: "INVALID_FIELD", Domain: "quota.runway.dev",
					Metadata: map[string]string{"field": "project_id"},
				},
				&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
					Field: "project_id", Description: "must be 1-63 characters of [a-z0-9-] starting with a letter",
				}}},
			},
		},
		"bad credentials are 401": {
			method: "GET", path: "/v1/projects/team-a", header: http.Header{"Authorization": {"Bearer bad"}},
			wantHTTP: http.StatusUnauthorized, wantCode: codes.Unauthenticated,
			wantDetails: []proto.Message{&errdetails.ErrorInfo{
				Reason: "CREDENTIALS_INVALID", Domain: "quota.runway.dev", Metadata: map[string]string{},
			}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			resp, body := e.do(t, tc.method, tc.path, tc.body, tc.header)
			if resp.StatusCode != tc.wantHTTP {
				t.Fatalf("HTTP %d, want %d: %s", resp.StatusCode, tc.wantHTTP, body)
			}
			st := restError(t, body)
			if codes.Code(st.GetCode()) != tc.wantCode || st.GetMessage() == "" {
				t.Errorf("code %v message %q, want %v and a message", codes.Code(st.GetCode()), st.GetMessage(), tc.wantCode)
			}
			if diff := cmp.Diff(tc.wantDetails, restDetails(t, st), protocmp.Transform()); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
		})
	}
}

func TestREST_panicIs500AndServingGoesOn(t *testing.T) {
	e := start(t)
	resp, body := e.do(t, "DELETE", "/v1/projects/team-a", "", nil)
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("HTTP %d, want 500: %s", resp.StatusCode, body)
	}
	if got := restError(t, body); codes.Code(got.GetCode()) != codes.Internal {
		t.Errorf("code = %v, want Internal", codes.Code(got.GetCode()))
	}
	resp, body = e.do(t, "GET", "/v1/projects/team-a", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("next call: HTTP %d: %s", resp.StatusCode, body)
	}
}

func TestREST_success(t *testing.T) {
	e := start(t)
	resp, body := e.do(t, "POST", "/v1/projects?projectId=team-b", `{"description":"b"}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, body)
	}
	var got struct{ Name string }
	if err := json.Unmarshal(body, &got); err != nil || got.Name != "projects/team-b" {
		t.Errorf("body %s (%v), want name projects/team-b", body, err)
	}
}

func TestREST_forwardsHeaders(t *testing.T) {
	e := start(t)
	t.Run("authorization reaches the auth slot", func(t *testing.T) {
		e.do(t, "GET", "/v1/projects/team-a", "", http.Header{"Authorization": {"Bearer good"}})
		if got := e.auth.last(); got != "Bearer good" {
			t.Errorf("authorization seen = %q, want Bearer good", got)
		}
	})
	t.Run("the request id is echoed", func(t *testing.T) {
		resp, _ := e.do(t, "GET", "/v1/projects/nope", "", http.Header{"X-Request-Id": {"rest-7"}})
		if got := resp.Header.Get("X-Request-Id"); got != "rest-7" {
			t.Errorf("X-Request-Id = %q, want rest-7", got)
		}
	})
	t.Run("a request id is made when there is none", func(t *testing.T) {
		resp, _ := e.do(t, "GET", "/v1/projects/team-a", "", nil)
		if resp.Header.Get("X-Request-Id") == "" {
			t.Error("no X-Request-Id in the response")
		}
	})
}

func TestHTTP_openAPIAndHealthz(t *testing.T) {
	e := start(t)
	resp, body := e.do(t, "GET", "/openapi.json", "", nil)
	if resp.StatusCode != http.StatusOK || string(body) != openAPI || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("/openapi.json: HTTP %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp, body = e.do(t, "GET", "/healthz", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: HTTP %d %s", resp.StatusCode, body)
	}
	resp, _ = e.do(t, "GET", "/v1/nothing/here", "", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path: HTTP %d, want 404", resp.StatusCode)
	}
}

// With a UI mounted, the UI gets the paths the server does not own and
// the REST, OpenAPI and health paths are still the server's.
func TestHTTP_uiDoesNotShadowREST(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ui:" + r.URL.Path)) })
	e := start(t, func(c *grpcserver.Config) { c.UI = ui })
	for path, want := range map[string]string{"/": "ui:/", "/workloads/team-a/a1": "ui:/workloads/team-a/a1"} {
		if resp, body := e.do(t, "GET", path, "", nil); resp.StatusCode != http.StatusOK || string(body) != want {
			t.Errorf("GET %s: HTTP %d %q, want %q", path, resp.StatusCode, body, want)
		}
	}
	if resp, body := e.do(t, "GET", "/v1/projects/team-a", "", nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"projects/team-a"`) {
		t.Errorf("REST under a UI: HTTP %d %s", resp.StatusCode, body)
	}
	if resp, body := e.do(t, "GET", "/v1/nothing/here", "", nil); resp.StatusCode != http.StatusNotFound || strings.HasPrefix(string(body), "ui:") {
		t.Errorf("unknown REST path under a UI: HTTP %d %s, want the gateway's 404", resp.StatusCode, body)
	}
	if resp, body := e.do(t, "GET", "/openapi.json", "", nil); string(body) != openAPI {
		t.Errorf("/openapi.json under a UI: HTTP %d %s", resp.StatusCode, body)
	}
}
