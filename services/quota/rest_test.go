package quota_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
)

// TestREST drives the gateway: the same resources and the same errors as
// over gRPC, with grpc-gateway's default HTTP codes and the ErrorInfo reason
// in the body.
func TestREST(t *testing.T) {
	e := newEnv(t)

	code, body := e.rest(t, http.MethodPost, "/v1/departments?departmentId=research",
		`{"description":"Research","nodePoolQuotas":[{"nodePool":"nodepools/default","gpu":{"deservedMilliGpus":"6000"}}]}`)
	if code != http.StatusOK {
		t.Fatalf("create department: %d %s", code, body)
	}
	code, body = e.rest(t, http.MethodPost, "/v1/projects?projectId=team-a",
		`{"department":"departments/research","nodePoolQuotas":[{"nodePool":"nodepools/default","gpu":{"deservedMilliGpus":4000}}]}`)
	if code != http.StatusOK {
		t.Fatalf("create project: %d %s", code, body)
	}
	var created quotav1.Project
	decode(t, body, &created)
	if created.GetNodePoolQuotas()[0].GetCpu().GetDeservedMilliCpu() != -1 || created.GetEtag() == "" {
		t.Fatalf("created = %v, want the defaults filled and an etag", &created)
	}

	// PATCH: the gateway derives update_mask from the JSON fields sent.
	code, body = e.rest(t, http.MethodPatch, "/v1/projects/team-a", `{"description":"Vision"}`)
	if code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, body)
	}
	var patched quotav1.Project
	decode(t, body, &patched)
	if patched.GetDescription() != "Vision" || patched.GetDepartment() != "departments/research" || len(patched.GetNodePoolQuotas()) != 1 {
		t.Fatalf("patched = %v, want only the description changed", &patched)
	}

	// GET, change, PATCH the whole resource back: output-only fields with
	// their stored values are accepted, and the etag makes it conditional.
	code, body = e.rest(t, http.MethodGet, "/v1/projects/team-a", "")
	if code != http.StatusOK {
		t.Fatalf("get: %d %s", code, body)
	}
	var whole map[string]any
	if err := json.Unmarshal(body, &whole); err != nil {
		t.Fatal(err)
	}
	whole["description"] = "Vision and speech"
	roundTrip, _ := json.Marshal(whole)
	code, body = e.rest(t, http.MethodPatch, "/v1/projects/team-a", string(roundTrip))
	if code != http.StatusOK {
		t.Fatalf("patch of the whole resource read with GET: %d %s", code, body)
	}
	// The same body again: its etag is now stale.
	before := e.state(t)
	code, body = e.rest(t, http.MethodPatch, "/v1/projects/team-a", string(roundTrip))
	wantREST(t, code, body, http.StatusConflict, "ETAG_MISMATCH")
	assertSameState(t, before, e.state(t))

	_, err := e.client.UpdateSettings(t.Context(), &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings", RejectOverSubscription: true}})
	if err != nil {
		t.Fatal(err)
	}
	before = e.state(t)
	for _, tc := range []struct {
		name             string
		method, path     string
		body             string
		wantCode         int
		wantReason       string
		wantMessage      string
		wantViolatedPath string
	}{
		{"a malformed project id", http.MethodPost, "/v1/projects?projectId=Team-B", `{}`, http.StatusBadRequest, "INVALID_FIELD", "", "project_id"},
		{"a negative GPU quota", http.MethodPost, "/v1/projects?projectId=team-b",
			`{"nodePoolQuotas":[{"nodePool":"nodepools/default","gpu":{"deservedMilliGpus":"-5"}}]}`,
			http.StatusBadRequest, "INVALID_FIELD", "", "project.node_pool_quotas[0].gpu.deserved_milli_gpus"},
		{"an output-only field changed in a PATCH", http.MethodPatch, "/v1/projects/team-a", `{"uid":"mine"}`,
			http.StatusBadRequest, "IMMUTABLE_FIELD", "", "update_mask"},
		{"a missing project", http.MethodGet, "/v1/projects/nope", "", http.StatusNotFound, "PROJECT_NOT_FOUND", "", ""},
		{"a project in a missing department", http.MethodPost, "/v1/projects?projectId=team-b", `{"department":"departments/nope"}`,
			http.StatusNotFound, "DEPARTMENT_NOT_FOUND", "", ""},
		{"a taken project id", http.MethodPost, "/v1/projects?projectId=team-a", `{}`, http.StatusConflict, "PROJECT_ALREADY_EXISTS", "", ""},
		{"a stale etag on delete", http.MethodDelete, "/v1/projects/team-a?etag=1", "", http.StatusConflict, "ETAG_MISMATCH", "", ""},
		{"a department that still has projects", http.MethodDelete, "/v1/departments/research", "", http.StatusBadRequest, "DEPARTMENT_NOT_EMPTY", "", ""},
		{"an over-subscribed department", http.MethodPost, "/v1/projects?projectId=team-b",
			`{"department":"departments/research","nodePoolQuotas":[{"nodePool":"nodepools/default","gpu":{"deservedMilliGpus":"3000"}}]}`,
			http.StatusBadRequest, "OVER_SUBSCRIBED", "projects would deserve 7 GPUs in pool default, above the department's 6", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.rest(t, tc.method, tc.path, tc.body)
			r := wantREST(t, code, body, tc.wantCode, tc.wantReason)
			if !strings.Contains(r.Message, tc.wantMessage) {
				t.Fatalf("message %q, want it to contain %q", r.Message, tc.wantMessage)
			}
			if tc.wantViolatedPath != "" && !violates(r, tc.wantViolatedPath) {
				t.Fatalf("body %s, want a field violation on %q", body, tc.wantViolatedPath)
			}
			assertSameState(t, before, e.state(t))
		})
	}
}

func wantREST(t *testing.T, code int, body []byte, wantCode int, wantReason string) restError {
	t.Helper()
	if code != wantCode {
		t.Fatalf("HTTP %d %s, want %d", code, body, wantCode)
	}
	r := parseRESTError(t, body)
	if r.reason() != wantReason {
		t.Fatalf("reason %q in %s, want %q", r.reason(), body, wantReason)
	}
	return r
}

func violates(r restError, field string) bool {
	for _, d := range r.Details {
		for _, v := range d.FieldViolations {
			if v.Field == field {
				return true
			}
		}
	}
	return false
}

// TestREST_NodePoolTolerations: a pool's tolerations over REST, in the
// JSON names and enum spellings of the API, and a bad one refused with its
// field.
func TestREST_NodePoolTolerations(t *testing.T) {
	e := newEnv(t)
	code, body := e.rest(t, http.MethodPost, "/v1/nodepools?nodePoolId=ml",
		`{"nodeSelector":{"pool":"ml"},"tolerations":[{"key":"dedicated","value":"ml","effect":"TAINT_EFFECT_NO_SCHEDULE"}]}`)
	if code != http.StatusOK {
		t.Fatalf("create node pool: %d %s", code, body)
	}
	code, body = e.rest(t, http.MethodGet, "/v1/nodepools/ml", "")
	var got quotav1.NodePool
	decode(t, body, &got)
	if ts := got.GetTolerations(); code != http.StatusOK || len(ts) != 1 || ts[0].GetKey() != "dedicated" || ts[0].GetValue() != "ml" ||
		ts[0].GetEffect() != quotav1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE {
		t.Fatalf("get: %d %s", code, body)
	}
	before := e.state(t)
	code, body = e.rest(t, http.MethodPatch, "/v1/nodepools/ml", `{"tolerations":[{"key":"-bad"}]}`)
	if r := wantREST(t, code, body, http.StatusBadRequest, "INVALID_FIELD"); !violates(r, "node_pool.tolerations[0].key") {
		t.Fatalf("body %s, want a field violation on node_pool.tolerations[0].key", body)
	}
	assertSameState(t, before, e.state(t))
}
