package etcdtest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Cluster is one embedded etcd member and a client connected to it.
type Cluster struct {
	// Endpoint is the client address, "127.0.0.1:port".
	Endpoint string
	// Client is connected to Endpoint and closed at cleanup.
	Client *clientv3.Client
	// Etcd is the server; Restart replaces it.
	Etcd *embed.Etcd

	dir  string
	opts []Option
}

// New starts an embedded etcd in t.TempDir() on a random 127.0.0.1 port,
// with the test speed-ups and a silent logger, and connects a client. Both
// are closed by t.Cleanup. Extra options apply after the defaults.
func New(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c := &Cluster{
		dir:  t.TempDir(),
		opts: append([]Option{WithTestSpeedups(), WithLogger(zap.NewNop())}, opts...),
	}
	e, err := StartEmbedded(c.dir, "http://127.0.0.1:0", c.opts...)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	c.Etcd = e
	c.Endpoint = e.Clients[0].Addr().String()
	// Registered before the client's cleanup, so it runs after it: closing
	// the server while a client still has watch streams open makes Close
	// wait for etcd's request timeout (about 5 s).
	t.Cleanup(func() {
		if c.Etcd != nil {
			c.Etcd.Close()
		}
	})
	c.Client = c.NewClient(t)
	return c
}

// NewClient returns another client of the cluster, closed by t.Cleanup
// (a second client is a second connection, e.g. a second scheduler replica).
func (c *Cluster) NewClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{c.Endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		// Reconnect within ~250 ms of a restart rather than gRPC's default
		// backoff (1 s growing to 120 s), which would make restart and
		// failover tests slow and their timing noisy.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
	})
	if err != nil {
		t.Fatalf("etcdtest: client for %s: %v", c.Endpoint, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Restart stops the server and starts it again on the same data directory
// and client port, as a crash-and-restart would. Clients stay open and
// reconnect on their own (clients from NewClient within about 250 ms).
// Open watch streams make the stop wait for etcd's request timeout (about
// 5 s) before they are cut, as in a real graceful shutdown.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	c.Etcd.Close()
	c.Etcd = nil // closing twice could block on etcd's drained server list
	e, err := StartEmbedded(c.dir, "http://"+c.Endpoint, c.opts...)
	if err != nil {
		t.Fatalf("etcdtest: restart: %v", err)
	}
	c.Etcd = e
}
