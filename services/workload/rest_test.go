package workload_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// do sends one REST request to the gateway and returns the status and body.
func (e *env) do(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+e.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// restDetails decodes the gateway's error body (a google.rpc.Status).
func restDetails(t *testing.T, body []byte) (codes.Code, []proto.Message) {
	t.Helper()
	st := &spb.Status{}
	if err := protojson.Unmarshal(body, st); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	var out []proto.Message
	for _, a := range st.GetDetails() {
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return codes.Code(st.GetCode()), out
}

const trainingJSON = `{"type":"WORKLOAD_TYPE_TRAINING","spec":{"image":"pytorch:25.01","gpu":{"fractionMilli":500},"pods":2}}`

func TestREST_CreateErrors(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	if code, body := e.do(t, "POST", "/v1/projects/team-a/workloads?workloadId=a1", trainingJSON); code != http.StatusOK {
		t.Fatalf("create: HTTP %d: %s", code, body)
	}
	for name, tc := range map[string]struct {
		path, body  string
		wantHTTP    int
		wantCode    codes.Code
		wantDetails []proto.Message
	}{
		"a GPU fraction above one is 400 naming the field": {
			path:     "/v1/projects/team-a/workloads?workloadId=a2",
			body:     `{"type":"WORKLOAD_TYPE_TRAINING","spec":{"image":"pytorch","gpu":{"fractionMilli":1500}}}`,
			wantHTTP: http.StatusBadRequest, wantCode: codes.InvalidArgument,
			wantDetails: []proto.Message{
				&errdetails.ErrorInfo{Reason: "INVALID_FIELD", Domain: "workload.runway.dev",
					Metadata: map[string]string{"field": "workload.spec.gpu.fraction_milli"}},
				&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{
					Field:       "workload.spec.gpu.fraction_milli",
					Description: "must be between 1 and 999 thousandths of a GPU; use devices for whole GPUs",
				}}},
			},
		},
		"an unknown project is 404": {
			path: "/v1/projects/nope/workloads?workloadId=a1", body: trainingJSON,
			wantHTTP: http.StatusNotFound, wantCode: codes.NotFound,
			wantDetails: []proto.Message{&errdetails.ErrorInfo{Reason: "PROJECT_NOT_FOUND", Domain: "workload.runway.dev",
				Metadata: map[string]string{"project": "projects/nope"}}},
		},
		"a taken id is 409": {
			path: "/v1/projects/team-a/workloads?workload_id=a1", body: trainingJSON,
			wantHTTP: http.StatusConflict, wantCode: codes.AlreadyExists,
			wantDetails: []proto.Message{&errdetails.ErrorInfo{Reason: "WORKLOAD_ALREADY_EXISTS", Domain: "workload.runway.dev",
				Metadata: map[string]string{"workload": "projects/team-a/workloads/a1"}}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := e.do(t, "POST", tc.path, tc.body)
			if code != tc.wantHTTP {
				t.Fatalf("HTTP %d, want %d: %s", code, tc.wantHTTP, body)
			}
			gotCode, details := restDetails(t, body)
			if gotCode != tc.wantCode {
				t.Errorf("code %v, want %v", gotCode, tc.wantCode)
			}
			if diff := cmp.Diff(tc.wantDetails, details, protocmp.Transform()); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
		})
	}
	keys, _ := e.storeState(t)
	for k := range keys {
		if strings.HasPrefix(k, "/runway/v1/workloads/") && k != "/runway/v1/workloads/team-a/a1" {
			t.Errorf("a rejected create left %s behind", k)
		}
	}
}

func TestREST_Lifecycle(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a", "team-b")
	code, body := e.do(t, "POST", "/v1/projects/team-a/workloads?workloadId=a1", trainingJSON)
	if code != http.StatusOK {
		t.Fatalf("create: HTTP %d: %s", code, body)
	}
	created := &workloadv1.Workload{}
	if err := protojson.Unmarshal(body, created); err != nil {
		t.Fatal(err)
	}
	if created.GetName() != "projects/team-a/workloads/a1" || created.GetSpec().GetMinPods() != 2 {
		t.Errorf("created %v", created)
	}

	code, body = e.do(t, "GET", "/v1/projects/-/workloads?pageSize=10", "")
	list := &workloadv1.ListWorkloadsResponse{}
	if code != http.StatusOK || protojson.Unmarshal(body, list) != nil || len(list.GetWorkloads()) != 1 {
		t.Fatalf("list: HTTP %d: %s", code, body)
	}

	code, body = e.do(t, "POST", "/v1/projects/team-a/workloads/a1:suspend", "{}")
	suspended := &workloadv1.Workload{}
	if code != http.StatusOK || protojson.Unmarshal(body, suspended) != nil ||
		suspended.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED {
		t.Fatalf("suspend: HTTP %d: %s", code, body)
	}

	code, body = e.do(t, "DELETE", "/v1/projects/team-a/workloads/a1?etag="+created.GetEtag(), "")
	if code != http.StatusConflict {
		t.Fatalf("delete with a stale etag: HTTP %d, want 409: %s", code, body)
	}
	if gotCode, _ := restDetails(t, body); gotCode != codes.Aborted {
		t.Errorf("delete with a stale etag: code %v, want Aborted", gotCode)
	}
	code, body = e.do(t, "DELETE", "/v1/projects/team-a/workloads/a1?etag="+suspended.GetEtag(), "")
	if code != http.StatusOK {
		t.Fatalf("delete: HTTP %d: %s", code, body)
	}
	code, body = e.do(t, "GET", "/v1/projects/team-a/workloads/a1", "")
	if code != http.StatusNotFound {
		t.Fatalf("get after delete: HTTP %d, want 404: %s", code, body)
	}
}

// Over REST the watch is newline-delimited JSON, one {"result": ...} per line.
func TestREST_Watch(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	e.create(t, "team-a", "a0", training())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+e.addr+"/v1/projects/team-a/workloads:watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d", resp.StatusCode)
	}
	lines := bufio.NewScanner(resp.Body)
	readEvent := func(wantType workloadv1.WatchEventType, wantName string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stream ended: %v", lines.Err())
		}
		var line struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(lines.Bytes(), &line); err != nil {
			t.Fatalf("line %s: %v", lines.Bytes(), err)
		}
		ev := &workloadv1.WatchWorkloadsResponse{}
		if err := protojson.Unmarshal(line.Result, ev); err != nil {
			t.Fatalf("line %s: %v", lines.Bytes(), err)
		}
		if ev.GetType() != wantType || ev.GetWorkload().GetName() != wantName {
			t.Fatalf("event %v %q, want %v %q", ev.GetType(), ev.GetWorkload().GetName(), wantType, wantName)
		}
	}
	readEvent(added, name("team-a", "a0"))
	readEvent(synced, "")
	e.create(t, "team-a", "a1", training())
	readEvent(added, name("team-a", "a1"))
}
