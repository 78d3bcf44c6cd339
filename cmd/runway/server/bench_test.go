package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runwayhq/runway/cmd/runway/server"
	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/nodemanager"
)

// Benchmark shape (issue 3, "Measure"): benchSubmits 1-GPU trainings per
// iteration from benchCallers concurrent gRPC callers, on benchNodes
// simulated nodes with enough GPUs between them for every workload; the
// agents' pods are benchImage's, as host processes unless benchEngine
// names a container engine (BenchmarkSubmitEndToEndContainers).
const benchCallers = 32

var (
	benchSubmits = 2000
	benchNodes   = 16
	benchEngine  = ""
	benchImage   = "busybox"
)

// registerNodes registers n ready nodes of gpus simulated GPUs each in the
// default pool the way an agent does (nodemanager.RegisterNode under a
// lease), without an agent: nothing runs the bound workloads.
func registerNodes(ctx context.Context, b testing.TB, cli *clientv3.Client, n, gpus int) {
	lease, err := cli.Grant(ctx, 600)
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("node-%d", i)
		capacity := &commonv1.ResourceQuantity{MilliGpus: int64(gpus) * 1000, MilliCpu: 1 << 30, MemoryBytes: 1 << 50}
		node := &nodemanagerv1.Node{Name: nodemanager.NodeName(name), NodePool: "nodepools/default",
			Readiness: nodemanagerv1.Readiness_READINESS_READY, Uid: name, Capacity: capacity, Allocatable: capacity,
			CreateTime: timestamppb.Now(), HeartbeatTime: timestamppb.Now()}
		for d := range gpus {
			node.Devices = append(node.Devices, &nodemanagerv1.GpuDevice{Index: int32(d),
				Uuid: fmt.Sprintf("GPU-%s-%d", name, d), Model: "Sim", MemoryBytes: 80 << 30, Healthy: true})
		}
		if err := nodemanager.RegisterNode(ctx, cli, node, lease.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// etcdAddr is a slog handler that keeps the embedded etcd's client address
// from RunDev's "ready" line, so the benchmark can count bindings in etcd.
type etcdAddr struct {
	slog.Handler
	addr chan string
}

func (h etcdAddr) Enabled(context.Context, slog.Level) bool { return true }
func (h etcdAddr) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h etcdAddr) WithGroup(string) slog.Handler            { return h }
func (h etcdAddr) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "etcd" {
			select {
			case h.addr <- a.Value.String():
			default:
			}
			return false
		}
		return true
	})
	return nil
}

// BenchmarkSubmitEndToEnd measures submits per second end to end: gRPC
// CreateWorkload → etcd → scheduled → binding stored. Each iteration runs a
// fresh `runway dev` composition (RunDev with its production etcd settings:
// fsync on, no test speedups; the scheduler's default timing), one project
// with a quota for every workload, and benchSubmits 1-GPU trainings from
// benchCallers concurrent WorkloadService clients. The clock runs from the
// first submit until every workload has a binding under
// etcdstore.PrefixBindings.
//
// Metrics: submits/s (end to end), create-submits/s (until the last
// CreateWorkload returned), bind-tail-ms (from the last create returning
// to the last binding stored) and cpu-us/submit: the CPU time (user and
// system) of this process (services, etcd, agents) over the timed part per
// submit, which a machine loaded by others stretches less than the wall
// time (the pods' own processes are not in it). With agents, started/s
// runs the clock on until every pod's agent has reported it running (its
// run record under etcdstore.PrefixRuns says RUNNING): bound and started;
// a pod reported FAILED fails the benchmark.
func BenchmarkSubmitEndToEnd(b *testing.B) {
	b.Run("agents=0", func(b *testing.B) { benchEndToEnd(b, false) })
	b.Run(fmt.Sprintf("agents=%d", benchNodes), func(b *testing.B) { benchEndToEnd(b, true) })
}

func benchEndToEnd(b *testing.B, agents bool) {
	var total, creating, started, cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c, e, s, u := benchSubmit(b, agents)
		total += c + e
		creating += c
		started += s
		cpu += u
	}
	n := float64(b.N * benchSubmits)
	if agents {
		b.ReportMetric(n/started.Seconds(), "started/s")
	}
	b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-us/submit")
	b.ReportMetric(n/total.Seconds(), "submits/s")
	b.ReportMetric(n/creating.Seconds(), "create-submits/s")
	b.ReportMetric(float64((total-creating).Milliseconds())/float64(b.N), "bind-tail-ms")
	b.ReportMetric(0, "ns/op")
}

// benchSubmit runs one iteration; the timer is stopped on entry and
// started around the measured part. It returns the time the creates took,
// the time from then until every binding was stored, the time from the
// first submit until every pod was reported running (with agents), and
// the CPU time the process used until the bindings were stored.
func benchSubmit(b *testing.B, agents bool) (creating, binding, started, cpu time.Duration) {
	dir := b.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := etcdAddr{addr: make(chan string, 1)}
	gpus := (benchSubmits + benchNodes - 1) / benchNodes
	cfg := server.DevConfig{DataDir: dir, Listen: "127.0.0.1:0", Logger: slog.New(h), StopGrace: time.Second, Engine: benchEngine}
	if agents {
		cfg.Nodes, cfg.GPUsPerNode = benchNodes, gpus
	}
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	go func() { done <- server.RunDev(ctx, cfg, func(addr, token string) { ready <- [2]string{addr, token} }) }()
	var addr, token string
	select {
	case r := <-ready:
		addr, token = r[0], r[1]
	case err := <-done:
		b.Fatalf("RunDev: %v", err)
	case <-time.After(60 * time.Second):
		b.Fatal("RunDev not ready after 60s")
	}
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("RunDev: %v", err)
			}
		case <-time.After(60 * time.Second):
			b.Error("RunDev did not stop within 60s")
		}
	}()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{<-h.addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(token)))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	quota := quotav1.NewQuotaServiceClient(conn)
	wl := workloadv1.NewWorkloadServiceClient(conn)

	if !agents {
		registerNodes(ctx, b, cli, benchNodes, gpus)
	}
	// Every node registered (the scheduler sees the capacity) before the clock.
	nodes := func() int64 {
		r, err := cli.Get(ctx, etcdstore.PrefixNodes, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			b.Fatal(err)
		}
		return r.Count
	}
	for deadline := time.Now().Add(60 * time.Second); nodes() < int64(benchNodes); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d nodes registered after 60s", nodes(), benchNodes)
		}
	}
	deserved := int64(benchSubmits) * 1000
	if _, err := quota.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "bench", Project: &quotav1.Project{
		NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
			Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}}}); err != nil {
		b.Fatalf("CreateProject: %v", err)
	}
	count := func(prefix string) int64 {
		r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			b.Fatal(err)
		}
		return r.Count
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, benchCallers)
	b.StartTimer()
	start, cpu0 := time.Now(), processCPU(b)
	for range benchCallers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(benchSubmits) {
					return
				}
				_, err := wl.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{
					Parent: "projects/bench", WorkloadId: fmt.Sprintf("w-%05d", i), Workload: &workloadv1.Workload{
						Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
						Spec: &workloadv1.WorkloadSpec{Image: benchImage, Command: []string{"sleep", "600"},
							Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}})
				if err != nil {
					errs <- fmt.Errorf("CreateWorkload w-%05d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	created := time.Now()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(120 * time.Second); count(etcdstore.PrefixBindings) < int64(benchSubmits); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d bindings stored after 120s", count(etcdstore.PrefixBindings), benchSubmits)
		}
	}
	end, cpu1 := time.Now(), processCPU(b)
	if agents {
		for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if time.Now().Before(deadline) && count(etcdstore.PrefixRuns) < int64(benchSubmits) {
				continue // not every pod reported yet: no need to read the records
			}
			r, err := startedRuns(ctx, cli)
			if err != nil {
				b.Fatal(err)
			}
			if len(r.failed) > 0 {
				b.Fatalf("%d pods failed, %d of %d started; first: %s", len(r.failed), r.started, benchSubmits, r.failed[0])
			}
			if r.started == benchSubmits {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d pods reported running after 120s", r.started, benchSubmits)
			}
		}
	}
	b.StopTimer()
	return created.Sub(start), end.Sub(created), time.Since(start), cpu1 - cpu0
}

// processCPU is this process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runs counts the pods whose run record says they started (RUNNING, or
// ended SUCCEEDED) and lists those that FAILED: a pod whose command could
// not start has a run record too, and is not started.
type runs struct {
	started int
	failed  []string // "{run key}: {message}"
}

func startedRuns(ctx context.Context, cli *clientv3.Client) (runs, error) {
	var out runs
	resp, err := cli.Get(ctx, etcdstore.PrefixRuns, clientv3.WithPrefix())
	if err != nil {
		return out, fmt.Errorf("read run records: %w", err)
	}
	for _, kv := range resp.Kvs {
		r := new(nodemanagerv1.ReportWorkloadStateRequest)
		if err := proto.Unmarshal(kv.Value, r); err != nil {
			return out, fmt.Errorf("run record %s: %w", kv.Key, err)
		}
		switch r.GetState() {
		case workloadv1.PodState_POD_STATE_RUNNING, workloadv1.PodState_POD_STATE_SUCCEEDED:
			out.started++
		case workloadv1.PodState_POD_STATE_FAILED:
			out.failed = append(out.failed, string(kv.Key)+": "+r.GetMessage())
		}
	}
	return out, nil
}
