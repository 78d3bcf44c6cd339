package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/runwayhq/runway/cmd/runway/server"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/services/nodemanager/agent"
	"github.com/runwayhq/runway/services/scheduler"
)

// readyAttrs is a slog handler that keeps the attributes of RunDev's
// "runway dev: ready" record: DevConfig offers no other way to learn the
// embedded etcd's address, which agents run outside the composition need.
type readyAttrs struct {
	mu    sync.Mutex
	attrs map[string]string
}

func (h *readyAttrs) Enabled(context.Context, slog.Level) bool { return true }
func (h *readyAttrs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *readyAttrs) WithGroup(string) slog.Handler            { return h }
func (h *readyAttrs) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "runway dev: ready" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attrs = map[string]string{}
	r.Attrs(func(a slog.Attr) bool { h.attrs[a.Key] = a.Value.String(); return true })
	return nil
}

func (h *readyAttrs) get(k string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.attrs[k]
}

// runAgent runs one node agent with 2 simulated GPUs and a 1 s lease until
// the returned stop is called (also at cleanup); stop waits for it.
func runAgent(t *testing.T, cli *clientv3.Client, dir, node string) (stop func()) {
	t.Helper()
	return runAgentWithLabels(t, cli, dir, node, nil)
}

// runAgentWithLabels is runAgent for a node that reports labels.
func runAgentWithLabels(t *testing.T, cli *clientv3.Client, dir, node string, labels map[string]string) (stop func()) {
	t.Helper()
	return runAgentWith(t, cli, dir, node, func(cfg *agent.Config) { cfg.Labels = labels })
}

// runAgentWith is runAgent with the config changed by tune.
func runAgentWith(t *testing.T, cli *clientv3.Client, dir, node string, tune func(*agent.Config)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := agent.Config{Node: node, Client: cli, DataDir: filepath.Join(dir, "nodes", node),
		LeaseTTL: time.Second, StopGrace: time.Second, Logger: quiet,
		Backend: simulated.New(simulated.Config{Count: 2, Node: node})}
	tune(&cfg)
	go func() { done <- agent.Run(ctx, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("agent %s: %v", node, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("agent %s did not stop within 30s", node)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// TestNodeLossReplaces covers issue 3's "node loss": a training runs on one
// of two nodes (2 GPUs each); that node's agent stops (its lease, 1 s, is
// no longer kept alive); the node leaves the NodeManagerService, the
// training goes back to PENDING and is then RUNNING on the other node.
//
// RunDev has no way to stop one of its own agents, so the composition runs
// with 0 nodes and the test runs the two agents itself (agent.Run, each with
// its own context) against the embedded etcd.
// startDevWithoutNodes runs the dev composition with no node agents, for
// tests that run their own (runAgent) against its embedded etcd, whose
// client it returns with the data directory and a connection to the server.
func startDevWithoutNodes(t *testing.T) (*dev, *clientv3.Client, string, *grpc.ClientConn) {
	t.Helper()
	dir := t.TempDir()
	h := &readyAttrs{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	cfg := server.DevConfig{DataDir: dir, Listen: "127.0.0.1:0", Nodes: 0, Logger: slog.New(h),
		EtcdOptions: []etcdtest.Option{etcdtest.WithTestSpeedups(), etcdtest.WithLogger(zap.NewNop())},
		Scheduler:   scheduler.Config{Interval: 100 * time.Millisecond, Debounce: 10 * time.Millisecond, NodeLostGrace: 500 * time.Millisecond}}
	go func() { done <- server.RunDev(ctx, cfg, func(addr, token string) { ready <- [2]string{addr, token} }) }()
	var addr, token string
	select {
	case r := <-ready:
		addr, token = r[0], r[1]
	case err := <-done:
		cancel()
		t.Fatalf("RunDev: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("RunDev not ready after 30s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("RunDev: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("RunDev did not stop within 30s of its context's end")
		}
	})
	etcdAddr := h.get("etcd")
	if etcdAddr == "" {
		t.Fatal("RunDev's ready record has no etcd address")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() }) // after the agents' stops (cleanups run last-in first-out)
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	d := &dev{addr: addr, token: token, quota: quotav1.NewQuotaServiceClient(conn),
		workload: workloadv1.NewWorkloadServiceClient(conn), scheduler: schedulerv1.NewSchedulerServiceClient(conn)}
	return d, cli, dir, conn
}

func TestNodeLossReplaces(t *testing.T) {
	d, cli, dir, conn := startDevWithoutNodes(t)
	nodes := nodemanagerv1.NewNodeManagerServiceClient(conn)

	stops := map[string]func(){
		"nodes/node-1": runAgent(t, cli, dir, "node-1"),
		"nodes/node-2": runAgent(t, cli, dir, "node-2"),
	}
	listNodes := func() (map[string]nodemanagerv1.Readiness, error) {
		r, err := nodes.ListNodes(t.Context(), &nodemanagerv1.ListNodesRequest{})
		if err != nil {
			return nil, err
		}
		out := map[string]nodemanagerv1.Readiness{}
		for _, n := range r.GetNodes() {
			out[n.GetName()] = n.GetReadiness()
		}
		return out, nil
	}
	eventually(t, "both nodes READY", func() string {
		ns, err := listNodes()
		if err != nil {
			return err.Error()
		}
		if ns["nodes/node-1"] != nodemanagerv1.Readiness_READINESS_READY || ns["nodes/node-2"] != nodemanagerv1.Readiness_READINESS_READY {
			return fmt.Sprintf("nodes %v", ns)
		}
		return ""
	})

	d.project(t, "team-a", 4)
	d.training(t, "team-a", "t1", 2)
	const name = "projects/team-a/workloads/t1"
	get := func() (*workloadv1.Workload, error) {
		return d.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: name})
	}
	// runningOn is the one node t1 runs on (all its pods there, RUNNING
	// with 2 devices), or "" and why not.
	runningOn := func() (string, string) {
		w, err := get()
		if err != nil {
			return "", err.Error()
		}
		st := w.GetStatus()
		if st.GetPhase() != running || len(st.GetNodes()) != 1 || len(st.GetPods()) != 1 {
			return "", fmt.Sprintf("status %v", st)
		}
		p := st.GetPods()[0]
		if p.GetState() != workloadv1.PodState_POD_STATE_RUNNING || len(p.GetDeviceIndexes()) != 2 || p.GetNode() != st.GetNodes()[0] {
			return "", fmt.Sprintf("status %v", st)
		}
		return p.GetNode(), ""
	}
	var first string
	eventually(t, "t1 RUNNING on one node", func() string {
		var why string
		first, why = runningOn()
		return why
	})
	start := time.Now()
	stops[first]()
	t.Logf("t1 ran on %s; its agent stopped", first)

	eventually(t, first+" gone from the NodeManagerService or not READY", func() string {
		ns, err := listNodes()
		if err != nil {
			return err.Error()
		}
		if r, ok := ns[first]; ok && r == nodemanagerv1.Readiness_READINESS_READY {
			return fmt.Sprintf("nodes %v", ns)
		}
		t.Logf("nodes %v", ns)
		return ""
	})
	t.Logf("%s gone/not ready after %v", first, time.Since(start).Round(time.Millisecond))

	// PENDING may be brief (the other node is free): a lost-node event or a
	// second start on the other node both show that t1 left first.
	var sawPending bool
	var second string
	eventually(t, "t1 RUNNING on the other node", func() string {
		w, err := get()
		if err != nil {
			return err.Error()
		}
		if w.GetStatus().GetPhase() == workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING {
			sawPending = true
		}
		n, why := runningOn()
		if why != "" {
			return why
		}
		if n == first {
			return "still on " + first
		}
		second = n
		return ""
	})
	t.Logf("t1 RUNNING on %s %v after the agent stopped (saw PENDING: %v)", second, time.Since(start).Round(time.Millisecond), sawPending)
	w, err := get()
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range w.GetStatus().GetEvents() {
		types = append(types, strings.TrimPrefix(e.GetType().String(), "WORKLOAD_EVENT_TYPE_")+":"+e.GetMessage())
	}
	t.Logf("t1 events: %v; preemption count %d", types, w.GetStatus().GetPreemptionCount())
	// The status controller folds the lost node into t1's status as a
	// preemption ("pods lost with their node").
	if w.GetStatus().GetPreemptionCount() < 1 || !slices.ContainsFunc(w.GetStatus().GetEvents(), func(e *workloadv1.WorkloadEvent) bool {
		return e.GetType() == workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED
	}) {
		t.Errorf("t1 moved from %s to %s with no PREEMPTED event (saw PENDING: %v): %v", first, second, sawPending, types)
	}
	t.Logf("pod processes at the end: %v", podProcs(dir))
}
