package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runwayhq/runway/cmd/runway/server"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/services/nodemanager"
)

// Proxy overhead: each iteration sends toolBenchSerial requests one after
// another (their latencies give p50 and p99) and toolBenchParallel more
// from toolBenchWorkers clients at once (requests/s), to a small HTTP
// server directly and through the tool proxy of a runway dev (the real
// workload service and guard answering the proxy's ResolveTool on every
// request), with the administrator's bearer token.
const (
	toolBenchSerial   = 1000
	toolBenchParallel = 4000
	toolBenchWorkers  = 16
)

// toolBench is a runway dev whose workspace "ws" of project bench runs
// (its node registered, its run report written, as an agent would) with
// tool web at the address of upstream.
type toolBench struct {
	proxyURL string // the tool's URL on the proxy
	addr     string // the API's
	token    string
}

func startToolBench(b testing.TB, upstream string) *toolBench {
	ctx, cancel := context.WithCancel(context.Background())
	h := etcdAddr{addr: make(chan string, 1)}
	var proxy string
	cfg := server.DevConfig{DataDir: b.TempDir(), Listen: "127.0.0.1:0", Logger: slog.New(h),
		ProxyReady: func(addr string) { proxy = addr }}
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() { done <- server.RunDev(ctx, cfg, func(addr, token string) { ready <- [2]string{addr, token} }) }()
	var addr, token string
	select {
	case r := <-ready:
		addr, token = r[0], r[1]
	case err := <-done:
		cancel()
		b.Fatalf("RunDev: %v", err)
	case <-time.After(60 * time.Second):
		cancel()
		b.Fatal("RunDev not ready after 60s")
	}
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("RunDev: %v", err)
		}
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{<-h.addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cli.Close() })
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(token)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	registerNodes(ctx, b, cli, 1, 1)
	deserved := int64(1000)
	if _, err := quotav1.NewQuotaServiceClient(conn).CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "bench",
		Project: &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
			Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}}}); err != nil {
		b.Fatalf("CreateProject: %v", err)
	}
	wl := workloadv1.NewWorkloadServiceClient(conn)
	if _, err := wl.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/bench", WorkloadId: "ws",
		Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, Spec: &workloadv1.WorkloadSpec{
			Image: "bench", Command: []string{"serve"},
			Tools: []*workloadv1.Tool{{Name: "web", Type: workloadv1.ToolType_TOOL_TYPE_CUSTOM, Port: 8080}}}}}); err != nil {
		b.Fatalf("CreateWorkload: %v", err)
	}
	get := func() *workloadv1.Workload {
		w, err := wl.GetWorkload(ctx, &workloadv1.GetWorkloadRequest{Name: "projects/bench/workloads/ws"})
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	var node string
	for deadline := time.Now().Add(60 * time.Second); node == ""; time.Sleep(50 * time.Millisecond) {
		if ps := get().GetStatus().GetPods(); len(ps) == 1 {
			node = ps[0].GetNode()
		}
		if time.Now().After(deadline) {
			b.Fatal("ws not bound after 60s")
		}
	}
	if err := nodemanager.PutRun(ctx, cli, &nodemanagerv1.ReportWorkloadStateRequest{Node: node, Workload: "projects/bench/workloads/ws",
		State: workloadv1.PodState_POD_STATE_RUNNING, ObserveTime: timestamppb.Now(),
		Ports: []*workloadv1.PortBinding{{ContainerPort: 8080, Address: upstream}}}); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); get().GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("ws not running after 60s")
		}
	}
	return &toolBench{proxyURL: "http://" + proxy + "/proxy/projects/bench/workloads/ws/web/ping", addr: addr, token: token}
}

// runway gateway --proxy-listen serves the same tools, in front of the
// workload service: its proxy asks the service the gateway routes the
// ToolService to, with the caller's token.
func TestGatewayToolProxy(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "the caller's token reached the pod", http.StatusTeapot)
			return
		}
		_, _ = io.WriteString(w, "pong")
	}))
	defer upstream.Close()
	tb := startToolBench(t, upstream.Listener.Addr().String())
	servers := map[string]string{}
	for _, s := range server.Services {
		servers[s] = tb.addr
	}
	ctx, cancel := context.WithCancel(t.Context())
	proxy := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- server.FrontDoor(ctx, server.FrontDoorConfig{Listen: "127.0.0.1:0", Servers: servers, ProxyListen: "127.0.0.1:0",
			ProxyReady: func(a string) { proxy <- a }, Logger: quiet})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("FrontDoor: %v", err)
		}
	}()
	var addr string
	select {
	case addr = <-proxy:
	case err := <-done:
		t.Fatalf("FrontDoor: %v", err)
	}
	url := "http://" + addr + "/proxy/projects/bench/workloads/ws/web/ping"
	fetch(t, http.DefaultClient, url, http.Header{"Authorization": {"Bearer " + tb.token}})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %d, want 401", resp.StatusCode)
	}
}

// fetch GETs url with the header and fails on anything but 200 "pong".
func fetch(b testing.TB, c *http.Client, url string, header http.Header) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header = header
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "pong" {
		b.Fatalf("GET %s: %d %q", url, resp.StatusCode, body)
	}
}

func BenchmarkToolProxy(b *testing.B) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "pong") }))
	defer upstream.Close()
	tb := startToolBench(b, upstream.Listener.Addr().String())
	for _, c := range []struct {
		name   string
		url    string
		header http.Header
	}{
		{"direct", upstream.URL + "/ping", http.Header{}},
		{"proxy", tb.proxyURL, http.Header{"Authorization": {"Bearer " + tb.token}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: toolBenchWorkers}}
			defer client.CloseIdleConnections()
			fetch(b, client, c.url, c.header) // warm: a connection, the guard's caches
			var lat []time.Duration
			var parallel time.Duration
			for b.Loop() {
				for range toolBenchSerial {
					start := time.Now()
					fetch(b, client, c.url, c.header)
					lat = append(lat, time.Since(start))
				}
				start := time.Now()
				var wg sync.WaitGroup
				for range toolBenchWorkers {
					wg.Go(func() {
						for range toolBenchParallel / toolBenchWorkers {
							fetch(b, client, c.url, c.header)
						}
					})
				}
				wg.Wait()
				parallel += time.Since(start)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(toolBenchParallel*b.N)/parallel.Seconds(), fmt.Sprintf("req/s@%d", toolBenchWorkers))
		})
	}
}
