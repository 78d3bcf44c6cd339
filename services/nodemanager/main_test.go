package nodemanager_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/services/nodemanager"
	"github.com/runwayhq/runway/services/nodemanager/agent"
)

// Every test stops its servers, agents and clients.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is one NodeManagerService on a real grpcserver over an embedded etcd.
type env struct {
	etcd   *etcdtest.Cluster
	client nodemanagerv1.NodeManagerServiceClient
}

func start(t *testing.T) *env {
	t.Helper()
	e := &env{etcd: etcdtest.New(t)}
	svc, err := nodemanager.New(nodemanager.Deps{Client: e.etcd.Client, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0", Logger: quiet, ShutdownTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(svc.Register)
	srv.RegisterGateway(svc.RegisterGateway)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("passthrough:///"+srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.client = nodemanagerv1.NewNodeManagerServiceClient(conn)
	return e
}

// agentRun is a running agent; kill cancels its context (the agent does
// not deregister) and waits for Run to return.
type agentRun struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned err
	err    error
}

func (a *agentRun) kill(t *testing.T) {
	t.Helper()
	a.cancel()
	<-a.done
	if !errors.Is(a.err, context.Canceled) {
		t.Errorf("agent Run = %v, want context.Canceled", a.err)
	}
}

// startAgent runs an agent for node with two simulated GPUs and a 1 s
// lease, stopped at cleanup if the test did not kill it.
func (e *env) startAgent(t *testing.T, node string, labels map[string]string, opts ...func(*agent.Config)) *agentRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &agentRun{cancel: cancel, done: make(chan struct{})}
	cfg := agent.Config{
		Node: node, Labels: labels, Client: e.etcd.Client, DataDir: t.TempDir(),
		Backend:  simulated.New(simulated.Config{Count: 2, Node: node}),
		LeaseTTL: time.Second, StopGrace: time.Second, MilliCPU: 8000, MemoryBytes: 64 << 30, Logger: quiet,
	}
	for _, o := range opts {
		o(&cfg)
	}
	go func() {
		a.err = agent.Run(ctx, cfg)
		close(a.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-a.done
	})
	return a
}

// eventually polls cond every 20 ms until it holds, failing after 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// registered waits until GetNode finds the node and returns it.
func (e *env) registered(t *testing.T, node string) *nodemanagerv1.Node {
	t.Helper()
	var n *nodemanagerv1.Node
	eventually(t, node+" to register", func() bool {
		var err error
		n, err = e.client.GetNode(context.Background(), &nodemanagerv1.GetNodeRequest{Name: "nodes/" + node})
		return err == nil
	})
	return n
}

// gone waits until GetNode reports the node NOT_FOUND.
func (e *env) gone(t *testing.T, node string) {
	t.Helper()
	eventually(t, node+" to expire", func() bool {
		_, err := e.client.GetNode(context.Background(), &nodemanagerv1.GetNodeRequest{Name: "nodes/" + node})
		return status.Code(err) == codes.NotFound
	})
}

func wantError(t *testing.T, err error, wantCode codes.Code, wantReason string) {
	t.Helper()
	if status.Code(err) != wantCode || apierr.Reason(err) != wantReason {
		t.Fatalf("error = %v (reason %q), want %v %s", err, apierr.Reason(err), wantCode, wantReason)
	}
	if d := apierr.Info(err).GetDomain(); d != "nodemanager.runway.dev" {
		t.Errorf("ErrorInfo domain %q, want nodemanager.runway.dev", d)
	}
}
