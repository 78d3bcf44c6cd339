package server_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/blob"
	"github.com/runwayhq/runway/pkg/blob/s3test"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/identity"
)

// serve runs server.Serve for one service until cleanup and returns its
// address.
func serve(t *testing.T, cfg server.ServeConfig) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	cfg.Listen, cfg.Logger = "127.0.0.1:0", quiet
	cfg.Ready = func(addr string) { ready <- addr }
	go func() { done <- server.Serve(ctx, cfg) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Serve(%s): %v", cfg.Service, err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve(%s): %v", cfg.Service, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("Serve(%s) did not stop", cfg.Service)
		}
	})
	return addr
}

// adminToken signs in as the bootstrap administrator with the one-time
// password the identity service printed, setting a new one, as an operator
// does on a fresh installation.
func adminToken(t *testing.T, identityAddr, printed string) string {
	t.Helper()
	_, password, ok := strings.Cut(strings.TrimSpace(printed), "one-time password: ")
	if !ok {
		t.Fatalf("the identity service printed no one-time password: %q", printed)
	}
	conn, err := grpc.NewClient("passthrough:///"+identityAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r, err := identityv1.NewIdentityServiceClient(conn).Login(t.Context(), &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_Password{Password: &identityv1.PasswordCredentials{
			User: "admin", Password: password, NewPassword: "a new password of the admin"}}})
	if err != nil {
		t.Fatalf("Login as the bootstrap administrator: %v", err)
	}
	return r.GetAccessToken()
}

func client(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestServeSeparately runs the quota and workload services as separate
// servers (`runway serve`): the workload service checks projects with the
// quota service at --quota-server.
func TestServeSeparately(t *testing.T) {
	etcd := etcdtest.New(t)
	eps := []string{etcd.Endpoint}
	var printed bytes.Buffer
	identityAddr := serve(t, server.ServeConfig{Service: server.Identity, EtcdEndpoints: eps, Out: &printed,
		Identity: identity.Config{BcryptCost: bcrypt.MinCost}})
	token := adminToken(t, identityAddr, printed.String())
	quotaAddr := serve(t, server.ServeConfig{Service: server.Quota, EtcdEndpoints: eps})
	workloadAddr := serve(t, server.ServeConfig{Service: server.Workload, EtcdEndpoints: eps, QuotaServer: quotaAddr})
	serve(t, server.ServeConfig{Service: server.Scheduler, EtcdEndpoints: eps, Replica: "test"})
	serve(t, server.ServeConfig{Service: server.NodeManager, EtcdEndpoints: eps})

	if _, err := quotav1.NewQuotaServiceClient(client(t, quotaAddr, token)).CreateProject(t.Context(),
		&quotav1.CreateProjectRequest{ProjectId: "team-a", Project: &quotav1.Project{}}); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	wl := workloadv1.NewWorkloadServiceClient(client(t, workloadAddr, token))
	spec := &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"true"}}}
	if _, err := wl.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "w1", Workload: spec}); err != nil {
		t.Fatalf("CreateWorkload in an existing project: %v", err)
	}
	if _, err := wl.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/nope", WorkloadId: "w1", Workload: spec}); err == nil {
		t.Fatal("CreateWorkload in a missing project succeeded")
	}

	// The gateway of a separate service serves the web UI beside its REST
	// paths, as runway dev does.
	for path, want := range map[string]string{"/": "text/html; charset=utf-8", "/projects": "text/html; charset=utf-8", "/v1/projects": "application/json"} {
		resp, err := http.Get("http://" + quotaAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Content-Type"); got != want {
			t.Errorf("GET %s on the quota service: %s, want %s", path, got, want)
		}
	}
}

// TestServeRejects: each misconfiguration is refused by its own check, with
// a working etcd so that no case fails on the store first; the error names
// what is wrong.
func TestServeRejects(t *testing.T) {
	cl := etcdtest.New(t)
	etcd := []string{cl.Endpoint}
	for _, tc := range []struct {
		name string
		cfg  server.ServeConfig
		want string
	}{
		{"unknown service", server.ServeConfig{Service: "nope", EtcdEndpoints: etcd}, `unknown service "nope"`},
		{"workload without quota", server.ServeConfig{Service: server.Workload, EtcdEndpoints: etcd}, "needs --quota-server"},
		{"no etcd endpoints", server.ServeConfig{Service: server.Quota}, "no etcd endpoints"},
		{"unknown runtime", server.ServeConfig{Service: server.Scheduler, EtcdEndpoints: etcd, Runtime: "nomad"}, `--runtime "nomad"`},
		{"kubernetes runtime off the scheduler", server.ServeConfig{Service: server.Quota, EtcdEndpoints: etcd,
			Runtime: server.RuntimeKubernetes}, "--runtime kubernetes is the scheduler's"},
		{"kubernetes runtime without the workload service", server.ServeConfig{Service: server.Scheduler, EtcdEndpoints: etcd,
			Runtime: server.RuntimeKubernetes, Kube: server.KubeConfig{Kubeconfig: "/dev/null"}}, "needs --workload-server"},
		{"kubernetes runtime with a missing kubeconfig", server.ServeConfig{Service: server.Scheduler, EtcdEndpoints: etcd,
			Runtime: server.RuntimeKubernetes, WorkloadServer: "127.0.0.1:1",
			Kube: server.KubeConfig{Kubeconfig: "/nonexistent/kubeconfig"}}, "/nonexistent/kubeconfig"},
		{"the nodemanager's kubernetes runtime with a missing kubeconfig", server.ServeConfig{Service: server.NodeManager, EtcdEndpoints: etcd,
			Runtime: server.RuntimeKubernetes, Kube: server.KubeConfig{Kubeconfig: "/nonexistent/kubeconfig"}}, "/nonexistent/kubeconfig"},
		{"the nodemanager with an agents' account that is not NAMESPACE/NAME", server.ServeConfig{Service: server.NodeManager,
			EtcdEndpoints: etcd, Runtime: server.RuntimeKubernetes,
			Kube: server.KubeConfig{Kubeconfig: "/dev/null", AgentServiceAccount: "runway-agent"}}, `--agent-service-account "runway-agent"`},
		{"two blob stores", server.ServeConfig{Service: server.Metrics, EtcdEndpoints: etcd, BlobDir: "/tmp",
			BlobS3: blob.S3Config{Endpoint: "https://127.0.0.1:1"}}, "choose one blob store"},
		{"an S3 store over plain http off loopback", server.ServeConfig{Service: server.Metrics, EtcdEndpoints: etcd,
			BlobS3: blob.S3Config{Endpoint: "http://192.0.2.1:9000", Bucket: "b"}}, "plain http only to a loopback address"},
		{"etcd TLS with a missing CA", server.ServeConfig{Service: server.Quota, EtcdEndpoints: etcd,
			EtcdTLS: server.EtcdTLS{CAFile: "/nonexistent/ca.crt"}}, "etcd TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Listen, tc.cfg.Logger = "127.0.0.1:0", quiet
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			err := server.Serve(ctx, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Serve = %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// TestServeMetricsService runs `runway serve metrics` as in a cluster:
// history from a real Prometheus (--prometheus-url), the reports' CSVs in a
// bucket of a real S3 server (--blob-s3-*, over TLS with key files). A
// report is computed, stored, downloaded and deleted there.
func TestServeMetricsService(t *testing.T) {
	etcd := etcdtest.New(t)
	eps := []string{etcd.Endpoint}
	var printed bytes.Buffer
	identityAddr := serve(t, server.ServeConfig{Service: server.Identity, EtcdEndpoints: eps, Out: &printed,
		Identity: identity.Config{BcryptCost: bcrypt.MinCost}})
	token := adminToken(t, identityAddr, printed.String())
	s3 := s3test.Start(t)
	// Prometheus scrapes itself: the service needs a server that answers,
	// not Runway's series, to compute a report.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := l.Addr().String()
	l.Close()
	prom := startPrometheusAt(t, self, self, "", time.Second)
	addr := serve(t, server.ServeConfig{Service: server.Metrics, EtcdEndpoints: eps, PrometheusURL: prom, HistoryInterval: time.Second,
		BlobS3: blob.S3Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, CAFile: s3.CA,
			AccessKeyFile: s3.AccessKeyFile, SecretKeyFile: s3.SecretKeyFile}})
	rc := metricsv1.NewReportServiceClient(client(t, addr, token))
	if _, err := rc.CreateReport(t.Context(), &metricsv1.CreateReportRequest{ReportId: "r1", Report: &metricsv1.Report{DisplayName: "r1",
		StartTime: timestamppb.New(time.Now().Add(-time.Hour)), EndTime: timestamppb.Now(),
		SegmentBy: metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT}}); err != nil {
		t.Fatal(err)
	}
	recs := readyCSV(t, rc, "reports/r1")
	if len(recs) != 1 || recs[0][0] != "segment" {
		t.Errorf("CSV %v, want its header alone (no project held anything)", recs)
	}
	store, err := blob.NewS3(t.Context(), blob.S3Config{Endpoint: s3.Endpoint, Bucket: s3.Bucket, CAFile: s3.CA,
		AccessKeyFile: s3.AccessKeyFile, SecretKeyFile: s3.SecretKeyFile})
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := store.List(t.Context(), ""); err != nil || len(keys) != 1 || keys[0] != "reports/r1.csv" {
		t.Errorf("the bucket holds %q (%v), want the report's CSV", keys, err)
	}
	if _, err := rc.DeleteReport(t.Context(), &metricsv1.DeleteReportRequest{Name: "reports/r1"}); err != nil {
		t.Fatal(err)
	}
	if keys, err := store.List(t.Context(), ""); err != nil || len(keys) != 0 {
		t.Errorf("after the delete the bucket holds %q (%v)", keys, err)
	}
	mc := metricsv1.NewMetricsServiceClient(client(t, addr, token))
	if _, err := mc.QueryClusterMetrics(t.Context(), &metricsv1.QueryClusterMetricsRequest{Name: "cluster"}); err != nil {
		t.Errorf("QueryClusterMetrics through Prometheus: %v", err)
	}
}
