package scheduler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/netcut"
)

// served is a replica with a gRPC server of its own on 127.0.0.1 (the
// health service, as every Runway server has), advertised in the election,
// and an etcd client of its own through a proxy: kill stops them at once,
// as SIGKILL does, so the replica can neither keep its lease alive nor
// revoke it.
type served struct {
	*replica
	cli  *clientv3.Client
	grpc *grpc.Server
	etcd *netcut.Proxy // between the replica and etcd
}

// kill cuts the replica off etcd (so it cannot revoke its lease on the
// way out), stops its server and closes its client.
func (r *served) kill() {
	r.etcd.Cut()
	r.grpc.Stop()
	_ = r.cli.Close()
}

// sessionTTL is the replicas' lease TTL in these tests: longer than any of
// their waits, so that only a revocation ends a dead leader's lease in time.
const sessionTTL = 120

func startServed(t *testing.T, cl *etcdtest.Cluster, name string) *served {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	proxy, err := netcut.New(cl.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	s, err := New(Config{Replica: name, Interval: 200 * time.Millisecond, Debounce: 10 * time.Millisecond, SessionTTL: sessionTTL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Deps{Client: cli})
	if err != nil {
		t.Fatal(err)
	}
	s.SetAddress(lis.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(ctx)
	}()
	r := &replica{Server: s, stop: func() { cancel(); <-done }}
	t.Cleanup(r.stop)
	return &served{replica: r, cli: cli, grpc: g, etcd: proxy}
}

// leaderOf waits for one of a and b to lead, and for the other to follow
// it (its health stream answered), and returns the leader first.
func leaderOf(t *testing.T, a, b *served) (leader, other *served) {
	t.Helper()
	waitFor(t, 10*time.Second, "a leader", func() bool { return a.leading() || b.leading() })
	leader, other = a, b
	if b.leading() {
		leader, other = b, a
	}
	waitFor(t, 10*time.Second, "the other replica following the leader", func() bool { return testutil.ToFloat64(other.metrics.following) == 1 })
	return leader, other
}

// leaderLease is the lease of the election key that leads.
func leaderLease(t *testing.T, cli *clientv3.Client) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Get(t.Context(), etcdstore.PrefixElectionScheduler+"/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("the leader's key: %v %v", resp, err)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// staleWrite is a plan of one binding fenced by f; it reports whether the
// binding was written, and apply's error.
func staleWrite(t *testing.T, cli *clientv3.Client, f fence, workload string) (bool, error) {
	t.Helper()
	key := etcdstore.PrefixBindings + bindingID("node-2", workload, 0)
	_, err := apply(t.Context(), cli, f, writes{groups: []group{{workload: workload,
		ops: []write{{key: key, msg: &workloadv1.PodStatus{Node: "nodes/node-2"}, checked: true}}}}}, 0)
	resp, gerr := cli.Get(t.Context(), key)
	if gerr != nil {
		t.Fatal(gerr)
	}
	return len(resp.Kvs) != 0, err
}

// phaseCount is how many takeovers' phase s has recorded.
func phaseCount(t *testing.T, s *Server, phase string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := s.metrics.failover.WithLabelValues(phase).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func fenceOf(r *served) fence {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader.fence
}

// TestTakeover_LeaderKilled: the leader is killed (its etcd connection and
// its server gone at once; its lease would live two minutes). The other
// replica sees its process gone, revokes its lease, leads and binds a
// workload submitted after the kill; a plan fenced with the dead leader's
// key is refused.
func TestTakeover_LeaderKilled(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	leader, other := leaderOf(t, startServed(t, cl, "a"), startServed(t, cl, "b"))
	training(t, cl.Client, "team-a", "a1", 1, 0)
	waitFor(t, 5*time.Second, "a1 bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-a/a1") })
	old, lease := fenceOf(leader), leaderLease(t, cl.Client)

	leader.kill()
	training(t, cl.Client, "team-b", "b1", 1, 1)
	waitFor(t, 20*time.Second, "b1 bound by the other replica", func() bool { return slices.Contains(bound(t, cl.Client), "team-b/b1") })
	if !other.leading() {
		t.Fatal("b1 is bound but the other replica does not lead")
	}
	if n := testutil.ToFloat64(other.metrics.leasesRevoked); n != 1 {
		t.Errorf("leases the other replica revoked: %v, want 1", n)
	}
	if ttl, err := cl.Client.TimeToLive(t.Context(), lease); err != nil || ttl.TTL != -1 {
		t.Errorf("the dead leader's lease: %v %v, want revoked (TTL -1)", ttl, err)
	}
	// Each phase of the takeover was seen once (elect and lease are
	// recorded beside the new leader's first steps).
	for _, phase := range []string{phaseLease, phaseElect, phaseReady, phaseFirstCycle} {
		waitFor(t, 5*time.Second, "the failover phase "+phase+" recorded", func() bool { return phaseCount(t, other.Server, phase) == 1 })
	}
	if written, err := staleWrite(t, cl.Client, old, "team-b/stale"); !errors.Is(err, etcdstore.ErrConflict) || written {
		t.Fatalf("a plan fenced by the dead leader: %v (written %v), want ErrConflict and nothing written", err, written)
	}
}

// TestTakeover_DeposedLeaderAlive: the leader's server stops while its
// process goes on (its address refuses): the other replica revokes its
// lease and leads. The deposed leader steps down, and its own late plan,
// fenced by the key it led with, is refused.
func TestTakeover_DeposedLeaderAlive(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	leader, other := leaderOf(t, startServed(t, cl, "a"), startServed(t, cl, "b"))
	old := fenceOf(leader)

	leader.grpc.Stop()
	waitFor(t, 20*time.Second, "the other replica leading", other.leading)
	waitFor(t, 20*time.Second, "the deposed leader stepped down", func() bool { return !leader.leading() })
	training(t, cl.Client, "team-b", "b1", 1, 1)
	waitFor(t, 5*time.Second, "b1 bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-b/b1") })
	if written, err := staleWrite(t, leader.cli, old, "team-b/late"); !errors.Is(err, etcdstore.ErrConflict) || written {
		t.Fatalf("the deposed leader's late plan: %v (written %v), want ErrConflict and nothing written", err, written)
	}
	if !other.leading() {
		t.Fatal("the new leader lost the election to the deposed one")
	}
}

// TestProcessGoneEvidence: only a refused connection proves a process gone,
// and only an address another host can dial is followed.
func TestProcessGoneEvidence(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if refused(t.Context(), addr) {
		t.Errorf("refused(%s) while it listens", addr)
	}
	_ = lis.Close()
	if !refused(t.Context(), addr) {
		t.Errorf("refused(%s) false once closed", addr)
	}
	for a, want := range map[string]bool{"127.0.0.1:7073": true, "sched-1.runway:7073": true, "[fd00::1]:7073": true,
		":7073": false, "0.0.0.0:7073": false, "[::]:7073": false, "sched-1": false} {
		if got := dialable(a); got != want {
			t.Errorf("dialable(%q) = %v, want %v", a, got, want)
		}
	}
}
