package server_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/runwayhq/runway/cmd/runway/server"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
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

func client(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
	quotaAddr := serve(t, server.ServeConfig{Service: server.Quota, EtcdEndpoints: eps})
	workloadAddr := serve(t, server.ServeConfig{Service: server.Workload, EtcdEndpoints: eps, QuotaServer: quotaAddr})
	serve(t, server.ServeConfig{Service: server.Scheduler, EtcdEndpoints: eps, Replica: "test"})
	serve(t, server.ServeConfig{Service: server.NodeManager, EtcdEndpoints: eps})

	if _, err := quotav1.NewQuotaServiceClient(client(t, quotaAddr)).CreateProject(t.Context(),
		&quotav1.CreateProjectRequest{ProjectId: "team-a", Project: &quotav1.Project{}}); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	wl := workloadv1.NewWorkloadServiceClient(client(t, workloadAddr))
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
}

func TestServeRejects(t *testing.T) {
	for name, cfg := range map[string]server.ServeConfig{
		"unknown service":        {Service: "nope", EtcdEndpoints: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0"},
		"workload without quota": {Service: server.Workload, EtcdEndpoints: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0"},
		"no etcd endpoints":      {Service: server.Quota, Listen: "127.0.0.1:0"},
		"unknown runtime": {Service: server.Scheduler, EtcdEndpoints: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0",
			Runtime: "nomad"},
		"kubernetes runtime off the scheduler": {Service: server.Quota, EtcdEndpoints: []string{"127.0.0.1:1"},
			Listen: "127.0.0.1:0", Runtime: server.RuntimeKubernetes},
		"kubernetes runtime without the workload service": {Service: server.Scheduler, EtcdEndpoints: []string{"127.0.0.1:1"},
			Listen: "127.0.0.1:0", Runtime: server.RuntimeKubernetes, Kube: server.KubeConfig{Kubeconfig: "/dev/null"}},
		"kubernetes runtime with a missing kubeconfig": {Service: server.Scheduler, EtcdEndpoints: []string{"127.0.0.1:1"},
			Listen: "127.0.0.1:0", Runtime: server.RuntimeKubernetes, WorkloadServer: "127.0.0.1:1",
			Kube: server.KubeConfig{Kubeconfig: "/nonexistent/kubeconfig"}},
		"etcd TLS with a missing CA": {Service: server.Quota, EtcdEndpoints: []string{"127.0.0.1:1"}, Listen: "127.0.0.1:0",
			EtcdTLS: server.EtcdTLS{CAFile: "/nonexistent/ca.crt"}},
	} {
		if err := server.Serve(t.Context(), cfg); err == nil {
			t.Errorf("%s: Serve returned nil", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
