package auth

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

func refusedCall(g *Guard, c *clock, peer, resource string) *identityv1.AuditEvent {
	return &identityv1.AuditEvent{Name: "auditEvents/" + g.audit.eventID(c.now()), CreateTime: timestamppb.New(c.now()),
		Method: "/runway.quota.v1.QuotaService/CreateProject", Resource: resource, PeerAddress: peer,
		StatusCode: 16, ErrorReason: "CREDENTIALS_MISSING"}
}

// Alike refused calls of a window are one event with their count; a host's
// distinct resources beyond its bound share one aggregate, and so do the
// window's calls beyond the window's bound.
func TestRefusedCallsAggregated(t *testing.T) {
	g, c, _ := newGuard(t, Config{})
	r := g.audit.refused
	for i := range 1000 {
		r.add(refusedCall(g, c, "10.0.0.1:1234", "projects/p"))
		if i%10 == 0 {
			c.add(time.Millisecond)
		}
	}
	for i := range 100 {
		r.add(refusedCall(g, c, "10.0.0.2:99", fmt.Sprintf("projects/p%d", i)))
	}
	evs := r.take()
	byKey := map[string]int64{}
	var total int64
	for _, ev := range evs {
		byKey[hostOf(ev.GetPeerAddress())+" "+ev.GetResource()] = ev.GetCount()
		total += ev.GetCount()
	}
	if total != 1100 {
		t.Errorf("the aggregates count %d calls, want 1100", total)
	}
	if byKey["10.0.0.1 projects/p"] != 1000 {
		t.Errorf("10.0.0.1's thousand alike calls: %v", byKey)
	}
	if len(evs) != 1+maxRefusedPerHost+1 {
		t.Errorf("%d aggregates, want %d (one, a host's bound, its overflow)", len(evs), 1+maxRefusedPerHost+1)
	}
	if byKey["10.0.0.2 *"] != int64(100-maxRefusedPerHost) {
		t.Errorf("10.0.0.2's overflow aggregate counts %d, want %d", byKey["10.0.0.2 *"], 100-maxRefusedPerHost)
	}
	if len(r.take()) != 0 {
		t.Error("take did not start a new window")
	}

	for i := range maxRefusedKeys + 50 {
		r.add(refusedCall(g, c, fmt.Sprintf("10.1.%d.%d:1", i/250, i%250), "projects/p"))
	}
	evs = r.take()
	if len(evs) != maxRefusedKeys+1 {
		t.Errorf("%d aggregates from many hosts, want the window's bound %d and one overflow", len(evs), maxRefusedKeys)
	}
}

// A host's refused calls empty its bucket: it is then limited until the
// bucket refills at the rate; other hosts are not.
func TestRefusedRateLimitPerHost(t *testing.T) {
	g, c, _ := newGuard(t, Config{RefusedRate: 10, RefusedBurst: 5})
	r := g.audit.refused
	for range 5 {
		if r.limited("10.0.0.1") != 0 {
			t.Fatal("limited within the burst")
		}
		r.spend("10.0.0.1")
	}
	if wait := r.limited("10.0.0.1"); wait <= 0 || wait > 100*time.Millisecond {
		t.Errorf("after the burst: wait %v, want up to 100ms", wait)
	}
	if r.limited("10.0.0.2") != 0 {
		t.Error("another host limited")
	}
	c.add(100 * time.Millisecond)
	if r.limited("10.0.0.1") != 0 {
		t.Error("still limited after a token's time")
	}
}

// The size cap deletes the oldest aggregates of refused calls, with their
// index keys, and never a change's event.
func TestRefusedEventsCapped(t *testing.T) {
	g, c, cluster := newGuard(t, Config{AuditMaxRefused: 3})
	change := &identityv1.AuditEvent{Name: "auditEvents/" + g.audit.eventID(c.now()), CreateTime: timestamppb.New(c.now()),
		Method: "/runway.quota.v1.QuotaService/DeleteProject", Principal: "users/admin"}
	g.audit.write(t.Context(), []queued{{ev: change}})
	for i := range 5 {
		c.add(time.Second)
		g.audit.refused.add(refusedCall(g, c, fmt.Sprintf("10.0.0.%d:1", i), "projects/p"))
		g.audit.flush(t.Context())
	}
	resp, err := cluster.Client.Get(t.Context(), etcdstore.PrefixAudit, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	sawChange := false
	for _, kv := range resp.Kvs {
		ev := &identityv1.AuditEvent{}
		if err := proto.Unmarshal(kv.Value, ev); err != nil {
			t.Fatal(err)
		}
		if ev.GetName() == change.GetName() {
			sawChange = true
			continue
		}
		peers = append(peers, ev.GetPeerAddress())
	}
	if !sawChange {
		t.Error("the change's event was deleted by the cap")
	}
	if fmt.Sprint(peers) != "[10.0.0.2:1 10.0.0.3:1 10.0.0.4:1]" {
		t.Errorf("kept refused-call events of %v, want the newest three", peers)
	}
	idx, err := cluster.Client.Get(t.Context(), etcdstore.PrefixAuditRefused, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || idx.Count != 3 {
		t.Errorf("index keys: %v, %v; want 3", idx, err)
	}
}

// A public method that refuses its caller's own credentials (the node mark
// key's token review) spends the host's refused-call budget: past the
// burst, the host's calls are refused before the method does any work.
func TestRefusedPublicMethodLimited(t *testing.T) {
	g, _, _ := newGuard(t, Config{RefusedBurst: 3, RefusedRate: 0.001})
	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0", Auth: g.UnaryInterceptor, AuthStream: g.StreamInterceptor,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ShutdownTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	refuser := &refusingNodeManager{}
	srv.Register(func(s *grpc.Server) { nodemanagerv1.RegisterNodeManagerServiceServer(s, refuser) })
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	conn, err := grpc.NewClient("passthrough:///"+srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	nm := nodemanagerv1.NewNodeManagerServiceClient(conn)
	var last error
	for range 10 {
		_, last = nm.GetNodeMarkKey(t.Context(), &nodemanagerv1.GetNodeMarkKeyRequest{})
	}
	if n := refuser.calls.Load(); n > 4 || apierr.Reason(last) != "TOO_MANY_REFUSED_CALLS" {
		t.Errorf("the method worked %d times of 10 and the last call got %v; want at most the burst's and TOO_MANY_REFUSED_CALLS", n, last)
	}
}

// refusingNodeManager refuses every mark key request, as a failed token
// review does.
type refusingNodeManager struct {
	nodemanagerv1.UnimplementedNodeManagerServiceServer
	calls atomic.Int64
}

func (r *refusingNodeManager) GetNodeMarkKey(context.Context, *nodemanagerv1.GetNodeMarkKeyRequest) (*nodemanagerv1.NodeMarkKey, error) {
	r.calls.Add(1)
	return nil, apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID)
}
