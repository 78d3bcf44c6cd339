package quota_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/services/quota"
)

// clock is the service's injected clock: every reading is one second later,
// so create and update times are distinct and ordered.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// env is one QuotaService on a real grpcserver listener (127.0.0.1:0) over an
// embedded etcd, with a generated gRPC client and a plain HTTP client for the
// REST gateway.
type env struct {
	etcd   *etcdtest.Cluster
	addr   string
	client quotav1.QuotaServiceClient
	http   *http.Client
	stop   func() // stops the server and waits for it; safe to call twice
}

// newEnv starts a service on a fresh embedded etcd.
func newEnv(t *testing.T) *env { return start(t, etcdtest.New(t)) }

// start starts a service on cluster (a second one on the same cluster is a
// restart or a second replica).
func start(t *testing.T, cluster *etcdtest.Cluster) *env {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	svc, err := quota.New(quota.Config{}, quota.Deps{
		Client: cluster.Client,
		Logger: logger,
		Now:    (&clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}).Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(svc.Register)
	srv.RegisterGateway(svc.RegisterGateway)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	var once sync.Once
	e := &env{etcd: cluster, addr: srv.Addr()}
	e.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-served; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(e.stop)

	conn, err := grpc.NewClient("passthrough:///"+e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.client = quotav1.NewQuotaServiceClient(conn)
	transport := &http.Transport{}
	e.http = &http.Client{Transport: transport, Timeout: 10 * time.Second}
	t.Cleanup(transport.CloseIdleConnections)
	return e
}

// rest sends one REST request and returns the status code and body.
func (e *env) rest(t *testing.T, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+e.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
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

// restError is grpc-gateway's default error body.
type restError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type            string            `json:"@type"`
		Reason          string            `json:"reason"`
		Metadata        map[string]string `json:"metadata"`
		FieldViolations []struct {
			Field string `json:"field"`
		} `json:"fieldViolations"`
	} `json:"details"`
}

func (r restError) reason() string {
	for _, d := range r.Details {
		if d.Reason != "" {
			return d.Reason
		}
	}
	return ""
}

func parseRESTError(t *testing.T, body []byte) restError {
	t.Helper()
	var r restError
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("error body %s: %v", body, err)
	}
	return r
}

// decode parses a REST response body into msg.
func decode(t *testing.T, body []byte, msg proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal(body, msg); err != nil {
		t.Fatalf("response %s: %v", body, err)
	}
}

// wantCode fails unless err is a status with code and reason.
func wantCode(t *testing.T, err error, code codes.Code, reason string) {
	t.Helper()
	if got := status.Code(err); got != code {
		t.Fatalf("code = %v (%v), want %v", got, err, code)
	}
	if got := apierr.Reason(err); got != reason {
		t.Fatalf("reason = %q (%v), want %q", got, err, reason)
	}
	if got := apierr.Info(err).GetDomain(); got != "quota.runway.dev" {
		t.Fatalf("domain = %q, want quota.runway.dev", got)
	}
}

// violationFields lists the BadRequest field paths of err.
func violationFields(err error) []string {
	st, _ := status.FromError(err)
	var out []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out = append(out, v.GetField())
			}
		}
	}
	return out
}

// metadata is the ErrorInfo metadata of err.
func metadata(err error) map[string]string { return apierr.Info(err).GetMetadata() }

// state is everything the service stores, read through its own API.
type state struct {
	Pools       []*quotav1.NodePool
	Departments []*quotav1.Department
	Projects    []*quotav1.Project
	Settings    *quotav1.Settings
}

func (e *env) state(t *testing.T) state {
	t.Helper()
	ctx := t.Context()
	pools, err := e.client.ListNodePools(ctx, &quotav1.ListNodePoolsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	depts, err := e.client.ListDepartments(ctx, &quotav1.ListDepartmentsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	projects, err := e.client.ListProjects(ctx, &quotav1.ListProjectsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	settings, err := e.client.GetSettings(ctx, &quotav1.GetSettingsRequest{Name: "settings"})
	if err != nil {
		t.Fatal(err)
	}
	return state{pools.GetNodePools(), depts.GetDepartments(), projects.GetProjects(), settings}
}

// unchangedBy runs a request that must fail and checks that the stored state
// is exactly what it was before, etags included.
func (e *env) unchangedBy(t *testing.T, request func() error) error {
	t.Helper()
	before := e.state(t)
	err := request()
	if err == nil {
		t.Fatal("the request succeeded, want an error")
	}
	assertSameState(t, before, e.state(t))
	return err
}

// Builders.

func i64(v int64) *int64     { return &v }
func i32(v int32) *int32     { return &v }
func f64(v float64) *float64 { return &v }
func yes(v bool) *bool       { return &v }

// gpus is a NodePoolQuota with only deserved GPUs set (whole GPUs).
func gpus(pool string, deserved int64) *quotav1.NodePoolQuota {
	return &quotav1.NodePoolQuota{NodePool: "nodepools/" + pool, Gpu: &quotav1.GpuQuota{DeservedMilliGpus: i64(deserved * 1000)}}
}

func (e *env) mustCreateDepartment(t *testing.T, id string, qs ...*quotav1.NodePoolQuota) *quotav1.Department {
	t.Helper()
	d, err := e.client.CreateDepartment(t.Context(), &quotav1.CreateDepartmentRequest{
		DepartmentId: id, Department: &quotav1.Department{NodePoolQuotas: qs}})
	if err != nil {
		t.Fatalf("CreateDepartment(%s): %v", id, err)
	}
	return d
}

func (e *env) mustCreateProject(t *testing.T, id, dept string, qs ...*quotav1.NodePoolQuota) *quotav1.Project {
	t.Helper()
	p, err := e.client.CreateProject(t.Context(), &quotav1.CreateProjectRequest{
		ProjectId: id, Project: &quotav1.Project{Department: dept, NodePoolQuotas: qs}})
	if err != nil {
		t.Fatalf("CreateProject(%s): %v", id, err)
	}
	return p
}

func (e *env) mustCreatePool(t *testing.T, id string, selector map[string]string) *quotav1.NodePool {
	t.Helper()
	np, err := e.client.CreateNodePool(t.Context(), &quotav1.CreateNodePoolRequest{
		NodePoolId: id, NodePool: &quotav1.NodePool{NodeSelector: selector}})
	if err != nil {
		t.Fatalf("CreateNodePool(%s): %v", id, err)
	}
	return np
}

func (e *env) setRejectOverSubscription(t *testing.T, on bool) {
	t.Helper()
	_, err := e.client.UpdateSettings(t.Context(), &quotav1.UpdateSettingsRequest{
		Settings:   &quotav1.Settings{Name: "settings", RejectOverSubscription: on},
		UpdateMask: mask("reject_over_subscription")})
	if err != nil {
		t.Fatal(err)
	}
}

// putRaw writes a message of another service (a node, a workload) straight
// into etcd, as its owner would.
func (e *env) putRaw(t *testing.T, key string, msg proto.Message) {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.etcd.Client.Put(t.Context(), key, string(b)); err != nil {
		t.Fatal(err)
	}
}

func names[T interface{ GetName() string }](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.GetName()
	}
	return out
}

func wantNames[T interface{ GetName() string }](t *testing.T, xs []T, want ...string) {
	t.Helper()
	if got := names(xs); !slices.Equal(got, want) {
		t.Fatalf("names = %v, want %v", got, want)
	}
}

func mask(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }

// assertSameState fails if the stored state changed.
func assertSameState(t *testing.T, before, after state) {
	t.Helper()
	if diff := cmp.Diff(before, after, protocmp.Transform()); diff != "" {
		t.Fatalf("a rejected request changed the stored state (-before +after):\n%s", diff)
	}
}
