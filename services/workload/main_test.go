package workload_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/sealing"
	"github.com/runwayhq/runway/services/workload"
)

// Every test stops its servers, streams and clients; goleak checks that
// nothing is left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the fixed clock's first reading.
var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// fixedClock returns t0, then one millisecond later at every reading, so
// that timestamps are predictable and strictly increasing.
type fixedClock struct {
	mu sync.Mutex
	n  int
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return t0.Add(time.Duration(c.n-1) * time.Millisecond)
}

// etcdProjects is the test's ProjectChecker: the production StoredProjects,
// reading projects and departments under their prefixes of the same etcd
// (as the quota service would write them), and a department's projects
// listed there too, without a QuotaService server.
type etcdProjects struct {
	workload.StoredProjects
	c *etcdstore.Collection[*quotav1.Project]
}

func (p etcdProjects) DepartmentProjects(ctx context.Context, dept string) ([]string, error) {
	all, _, err := p.c.ListAll(ctx, "")
	var out []string
	for _, it := range all {
		if it.Msg.GetDepartment() == dept {
			out = append(out, it.Msg.GetName())
		}
	}
	return out, err
}

// env is one WorkloadService on a real grpcserver (127.0.0.1:0) over an
// embedded etcd, with a generated client and an HTTP client for the gateway.
type env struct {
	etcd     *etcdtest.Cluster
	projects *etcdstore.Collection[*quotav1.Project]
	depts    *etcdstore.Collection[*quotav1.Department]
	client   workloadv1.WorkloadServiceClient
	gov      workloadv1.GovernanceServiceClient
	creds    workloadv1.CredentialServiceClient
	sources  workloadv1.DataSourceServiceClient
	keyFile  string // the credentials key file
	clock    workload.Clock
	addr     string
	http     *http.Client
}

func start(t testing.TB, opts ...etcdtest.Option) *env {
	t.Helper()
	return startWithClock(t, &fixedClock{}, opts...)
}

// startWithClock is start with the service reading clock.
func startWithClock(t testing.TB, clock workload.Clock, opts ...etcdtest.Option) *env {
	t.Helper()
	return startWith(t, clock, workload.Config{}, opts...)
}

// startWith is start with the service's clock and configuration.
func startWith(t testing.TB, clock workload.Clock, cfg workload.Config, opts ...etcdtest.Option) *env {
	t.Helper()
	e := &env{etcd: etcdtest.New(t, opts...), clock: clock}
	e.projects = etcdstore.NewCollection(e.etcd.Client, etcdstore.PrefixProjects,
		func() *quotav1.Project { return new(quotav1.Project) })
	e.depts = etcdstore.NewCollection(e.etcd.Client, etcdstore.PrefixDepartments,
		func() *quotav1.Department { return new(quotav1.Department) })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.keyFile = filepath.Join(t.TempDir(), "credentials.keys")
	if _, err := sealing.Create(e.keyFile); err != nil {
		t.Fatal(err)
	}
	ring, err := sealing.Load(e.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := workload.New(cfg, workload.Deps{
		Client: e.etcd.Client, Projects: etcdProjects{workload.NewStoredProjects(e.etcd.Client, nil), e.projects}, Logger: quiet, Clock: e.clock,
		CredentialKeys: ring,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0", Logger: quiet, ShutdownTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(svc.Register)
	srv.RegisterGateway(svc.RegisterGateway)
	e.addr = srv.Addr()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("passthrough:///"+e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.client = workloadv1.NewWorkloadServiceClient(conn)
	e.gov = workloadv1.NewGovernanceServiceClient(conn)
	e.creds = workloadv1.NewCredentialServiceClient(conn)
	e.sources = workloadv1.NewDataSourceServiceClient(conn)
	transport := &http.Transport{}
	e.http = &http.Client{Transport: transport, Timeout: 10 * time.Second}
	t.Cleanup(transport.CloseIdleConnections)
	return e
}

// addProjects writes projects as the quota service would.
func (e *env) addProjects(t testing.TB, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := e.projects.Create(context.Background(), id, &quotav1.Project{Name: "projects/" + id}); err != nil {
			t.Fatalf("create project %s: %v", id, err)
		}
	}
}

// training is a valid one-GPU training spec.
func training() *workloadv1.Workload {
	return &workloadv1.Workload{
		Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		Spec: &workloadv1.WorkloadSpec{
			Image:   "nvcr.io/nvidia/pytorch:25.01-py3",
			Command: []string{"python", "train.py"},
			Gpu:     &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}},
		},
	}
}

func (e *env) create(t testing.TB, project, id string, w *workloadv1.Workload) *workloadv1.Workload {
	t.Helper()
	got, err := e.client.CreateWorkload(context.Background(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/" + project, WorkloadId: id, Workload: w,
	})
	if err != nil {
		t.Fatalf("CreateWorkload(%s/%s): %v", project, id, err)
	}
	return got
}

// wantError checks an error's code and ErrorInfo reason, and returns its
// ErrorInfo metadata.
func wantError(t testing.TB, err error, wantCode codes.Code, wantReason string) map[string]string {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v %s", wantCode, wantReason)
	}
	st := status.Convert(err)
	if st.Code() != wantCode || apierr.Reason(err) != wantReason {
		t.Fatalf("error %v %s (%q), want %v %s", st.Code(), apierr.Reason(err), st.Message(), wantCode, wantReason)
	}
	info := apierr.Info(err)
	if info.GetDomain() != "workload.runway.dev" {
		t.Errorf("ErrorInfo domain %q, want workload.runway.dev", info.GetDomain())
	}
	return info.GetMetadata()
}

// violations returns the BadRequest field violations of an error, by field.
func violations(err error) map[string]string {
	out := map[string]string{}
	for _, d := range status.Convert(err).Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				out[v.GetField()] = v.GetDescription()
			}
		}
	}
	return out
}

// storeState is every key under the Runway root with its revisions, and the
// store's revision: equal states before and after a request mean it wrote
// nothing at all.
func (e *env) storeState(t testing.TB) (map[string][2]int64, int64) {
	t.Helper()
	resp, err := e.etcd.Client.Get(context.Background(), etcdstore.Root, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string][2]int64{}
	for _, kv := range resp.Kvs {
		keys[string(kv.Key)] = [2]int64{kv.CreateRevision, kv.ModRevision}
	}
	return keys, resp.Header.Revision
}
