package nodemanager_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/nodemanager"
)

// etcdCalls counts a client's unary etcd calls by method, and the reads
// of keys below a prefix.
type etcdCalls struct {
	mu      sync.Mutex
	methods map[string]int
	reads   map[string]int // Range calls by the watched prefix their key is under
}

func (c *etcdCalls) intercept(prefixes ...string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.mu.Lock()
		c.methods[method]++
		if r, ok := req.(*etcdserverpb.RangeRequest); ok {
			for _, p := range prefixes {
				if strings.HasPrefix(string(r.Key), p) {
					c.reads[p]++
				}
			}
		}
		c.mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// A node's heartbeat costs one round trip in a list (its lease's
// TimeToLive; the lease id comes with the node key), and the times are
// the leases' renewals.
func TestListNodes_oneRoundTripPerHeartbeat(t *testing.T) {
	cl := etcdtest.New(t)
	ctx := t.Context()
	const nodes = 5
	lease, err := cl.Client.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	old := timestamppb.New(time.Now().Add(-time.Hour))
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		capacity := &commonv1.ResourceQuantity{MilliGpus: 1000, MilliCpu: 1000, MemoryBytes: 1 << 30}
		n := &nodemanagerv1.Node{Name: nodemanager.NodeName(name), Readiness: nodemanagerv1.Readiness_READINESS_READY,
			Uid: name, Capacity: capacity, Allocatable: capacity, CreateTime: old, HeartbeatTime: old}
		if err := nodemanager.RegisterNode(ctx, cl.Client, n, lease.ID); err != nil {
			t.Fatal(err)
		}
	}
	calls := &etcdCalls{methods: map[string]int{}, reads: map[string]int{}}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cl.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(calls.intercept(etcdstore.PrefixLeases))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	srv, err := nodemanager.New(nodemanager.Deps{Client: cli})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.ListNodes(ctx, &nodemanagerv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetNodes()) != nodes {
		t.Fatalf("listed %d nodes, want %d", len(resp.GetNodes()), nodes)
	}
	for _, n := range resp.GetNodes() {
		if time.Since(n.GetHeartbeatTime().AsTime()) > time.Minute {
			t.Errorf("%s heartbeat %v, want the lease's renewal (just now)", n.GetName(), n.GetHeartbeatTime().AsTime())
		}
	}
	calls.mu.Lock()
	defer calls.mu.Unlock()
	if got := calls.methods["/etcdserverpb.Lease/LeaseTimeToLive"]; got != nodes {
		t.Errorf("%d lease TimeToLive calls, want one per node (%d)", got, nodes)
	}
	if got := calls.reads[etcdstore.PrefixLeases]; got != 0 {
		t.Errorf("%d reads of lease keys, want none (the node key carries its lease)", got)
	}
}
