package scheduler

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// Every test stops its replicas, watches and clients; goleak checks that
// nothing is left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is when the test workloads are created.
var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// put writes msg to key as its owner service would.
func put(t testing.TB, cli *clientv3.Client, key string, msg proto.Message) {
	t.Helper()
	b, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(t.Context(), key, string(b)); err != nil {
		t.Fatal(err)
	}
}

// node writes a Ready node of gpus GPUs of 80 GiB in the default pool, as
// the node manager does (nodes/{node}).
func node(t testing.TB, cli *clientv3.Client, id string, gpus int) {
	t.Helper()
	n := &nodemanagerv1.Node{Name: "nodes/" + id, NodePool: "nodepools/default",
		Readiness: nodemanagerv1.Readiness_READINESS_READY,
		Capacity:  &commonv1.ResourceQuantity{MilliGpus: int64(gpus) * 1000, MilliCpu: 64000, MemoryBytes: 512 << 30}}
	for i := range gpus {
		n.Devices = append(n.Devices, &nodemanagerv1.GpuDevice{Index: int32(i), MemoryBytes: 80 << 30, Healthy: true})
	}
	put(t, cli, etcdstore.PrefixNodes+id, n)
}

// project writes a project of the default department deserving gpus GPUs
// in the default pool, in the quota service's format.
func project(t testing.TB, cli *clientv3.Client, id string, gpus int64) {
	t.Helper()
	d := gpus * 1000
	put(t, cli, etcdstore.PrefixProjects+id, &quotav1.Project{Name: "projects/" + id, Department: "departments/default",
		NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &d}}}})
}

// training writes a PENDING training workload of one pod on gpus GPUs,
// created at t0 + seq seconds, in the workload service's format.
func training(t testing.TB, cli *clientv3.Client, proj, id string, gpus int32, seq int) {
	t.Helper()
	put(t, cli, etcdstore.PrefixWorkloads+proj+"/"+id, &workloadv1.Workload{
		Name: "projects/" + proj + "/workloads/" + id, Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		CreateTime: timestamppb.New(t0.Add(time.Duration(seq) * time.Second)),
		Spec: &workloadv1.WorkloadSpec{Image: "x", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: gpus}},
			MilliCpu: 100, MemoryBytes: 100 << 20},
		Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING},
	})
}

// bound lists the workloads with a binding, as "project/workload" sorted.
func bound(t testing.TB, cli *clientv3.Client) []string {
	t.Helper()
	resp, err := cli.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, kv := range resp.Kvs {
		b, err := parseBinding(string(kv.Key)[len(etcdstore.PrefixBindings):], &workloadv1.PodStatus{})
		if err != nil {
			t.Fatal(err)
		}
		if !seen[b.Workload] {
			seen[b.Workload] = true
			out = append(out, b.Workload)
		}
	}
	sort.Strings(out)
	return out
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// replica is one running scheduler replica.
type replica struct {
	*Server
	stop func()
}

// startReplica runs a replica on its own etcd client; stop (also at
// cleanup) cancels it and waits until it has closed its session.
func startReplica(t testing.TB, cl *etcdtest.Cluster, name string, opts ...func(*Config)) *replica {
	t.Helper()
	cfg := Config{Replica: name, Interval: 200 * time.Millisecond, Debounce: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := New(cfg, Deps{Client: cl.NewClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx)
	}()
	r := &replica{Server: s}
	r.stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(r.stop)
	return r
}

// leading reports whether r holds the election.
func (r *replica) leading() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader != nil
}
