//go:build linux

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
)

// cluster is the control plane of the run, every part a proc.
type cluster struct {
	dir       string
	work      string // the agents' pod directories and the ledger: reachable by the pods' unprivileged users
	etcd      []*proc
	endpoints []string // etcd client addresses
	services  map[string]*proc
	addrs     map[string]string // service → its gRPC address
	metrics   map[string]string // scheduler replica → its /metrics address
	agents    []*proc
	client    *clientv3.Client // the checker's own connection
	token     string
}

// schedulers are the two replicas, by replica name.
var schedulers = []string{"sched-1", "sched-2"}

// startCluster starts etcd, the services and the agents, and signs in.
func startCluster(t *testing.T, runway, etcdBin string) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir(), services: map[string]*proc{}, addrs: map[string]string{}, metrics: map[string]string{}}
	work, err := os.MkdirTemp("", "runway-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	if err := os.Chmod(work, 0o711); err != nil {
		t.Fatal(err)
	}
	c.work = work
	var initial []string
	peers := make([]string, 3)
	for i := range 3 {
		peers[i] = "http://" + freeAddr(t)
		initial = append(initial, fmt.Sprintf("e%d=%s", i+1, peers[i]))
	}
	for i := range 3 {
		client := freeAddr(t)
		c.endpoints = append(c.endpoints, client)
		// fsync off: the machine is shared and a SIGKILLed process loses
		// nothing the kernel already has; kill -9 is what is tested.
		p := &proc{name: fmt.Sprintf("etcd-%d", i+1), bin: etcdBin, log: filepath.Join(c.dir, fmt.Sprintf("etcd-%d.log", i+1)),
			args: []string{"--name", fmt.Sprintf("e%d", i+1), "--data-dir", filepath.Join(c.dir, fmt.Sprintf("etcd-%d", i+1)),
				"--listen-client-urls", "http://" + client, "--advertise-client-urls", "http://" + client,
				"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
				"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
				"--max-txn-ops", "4096", "--unsafe-no-fsync", "--log-level", "error"}}
		p.start(t)
		c.etcd = append(c.etcd, p)
	}
	t.Cleanup(func() {
		for _, p := range c.etcd {
			p.stop(5 * time.Second)
		}
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	c.client = cli
	waitFor(t, 60*time.Second, "etcd cluster healthy", func() error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "health")
		return err
	})

	etcdFlag := strings.Join(c.endpoints, ",")
	serve := func(name string, args ...string) {
		addr := freeAddr(t)
		p := &proc{name: name, bin: runway, log: filepath.Join(c.dir, name+".log"),
			args: append([]string{"serve", args[0], "--etcd-endpoints", etcdFlag, "--listen", addr}, args[1:]...)}
		p.start(t)
		c.services[name], c.addrs[name] = p, addr
		t.Cleanup(func() { p.stop(10 * time.Second) })
		c.waitServing(t, name)
	}
	serve("identity", "identity")
	var password string
	waitFor(t, 20*time.Second, "the one-time password", func() error {
		for line := range strings.Lines(c.services["identity"].output()) {
			if _, pw, ok := strings.Cut(strings.TrimSpace(line), "one-time password: "); ok {
				password = pw
				return nil
			}
		}
		return fmt.Errorf("not printed yet")
	})
	conn := c.dial(t, "identity")
	login, err := identityv1.NewIdentityServiceClient(conn).Login(t.Context(), &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_Password{Password: &identityv1.PasswordCredentials{
			User: "admin", Password: password, NewPassword: "the chaos administrator's password"}}})
	if err != nil {
		t.Fatalf("Login: %v", err)
	}
	c.token = login.GetAccessToken()
	serve("quota", "quota")
	serve("workload", "workload", "--quota-server", c.addrs["quota"])
	for _, r := range schedulers {
		c.metrics[r] = freeAddr(t)
		serve(r, "scheduler", "--replica", r, "--etcd-max-txn-ops", "4096", "--metrics-listen", c.metrics[r])
	}
	serve("nodemanager", "nodemanager")
	for i := range 3 {
		node := fmt.Sprintf("node-%d", i+1)
		// Pods work in {work}/{node}/{uid}.{pod}: the ledger's line names
		// the node by its working directory.
		data, pods := filepath.Join(c.dir, "agents", node), filepath.Join(c.work, node)
		if err := os.MkdirAll(data, 0o700); err != nil {
			t.Fatal(err)
		}
		p := &proc{name: node, bin: runway, log: filepath.Join(c.dir, node+".log"), podDirs: []string{pods, data},
			args: []string{"agent", "--runtime", "process", "--node", node, "--gpus", "4", "--etcd-endpoints", etcdFlag, "--data-dir", data, "--work-dir", pods}}
		p.start(t)
		c.agents = append(c.agents, p)
		t.Cleanup(func() { p.stop(10 * time.Second) })
	}
	return c
}

// dial connects to a service with the administrator's token.
func (c *cluster) dial(t *testing.T, service string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+c.addrs[service], grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer{c}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

type bearer struct{ c *cluster }

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if b.c.token == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + b.c.token}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// waitServing waits until a service's health check answers SERVING.
func (c *cluster) waitServing(t *testing.T, service string) {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+c.addrs[service], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h := healthpb.NewHealthClient(conn)
	p := c.services[service]
	waitFor(t, 60*time.Second, service+" serving", func() error {
		if !p.alive() {
			return fmt.Errorf("%s exited:\n%s", service, p.output())
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("%s", r.GetStatus())
		}
		return nil
	})
}

// leader is the scheduler replica holding the election ("" when none).
func (c *cluster) leader(ctx context.Context) string {
	resp, err := c.client.Get(ctx, "/runway/v1/election/scheduler/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return ""
	}
	replica, _, _ := strings.Cut(string(resp.Kvs[0].Value), "\n")
	return replica
}

// waitFor polls f every 50 ms until it returns nil, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buildRunway builds cmd/runway into dir.
func buildRunway(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "runway")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/runwayhq/runway/cmd/runway")
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/runway: %v\n%s", err, out)
	}
	return bin
}
