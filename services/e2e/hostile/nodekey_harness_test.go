package hostile

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwayhq/runway/cmd/runway/server"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
	"github.com/runwayhq/runway/services/scheduler"
)

// The node-key harness of the hostile-tenant suite: a real kube-apiserver
// with KWOK playing the kubelets of two GPU nodes, nk-a and nk-b, and
// `runway dev` in this process with the Kubernetes runtime on it (its
// NodeManagerService gives the node agents their keys), its log kept.

// nkNodes are the harness's nodes: nk-a has no GPU (nothing of Runway's
// runs there), nk-b two.
var nkNodes = []kwoktest.Node{{Name: "nk-a"}, {Name: "nk-b", GPUs: 2}}

// nkEnv is the running harness.
type nkEnv struct {
	kc   *kwoktest.Cluster
	ns   string // Runway's namespace, also the node agents' service account's
	dev  *apiDev
	log  *syncBuffer // Runway's log
	dir  string      // Runway's data directory: its etcd answers on dir/etcd/client.sock
	etcd *clientv3.Client
}

// nkStart starts the cluster, its nodes and Runway.
func nkStart(t *testing.T) *nkEnv {
	t.Helper()
	kc, err := kwoktest.Start(t.TempDir())
	if err != nil {
		t.Fatal(err) // bin/kube-apiserver and bin/kwok are built by make
	}
	t.Cleanup(kc.Stop)
	e := &nkEnv{kc: kc, ns: "nk-runway", log: &syncBuffer{}}
	if _, err := kc.Kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kc.CreateNodes(t.Context(), nkNodes...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := kc.WaitReady(ctx, "nk-a", "nk-b"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e.dev = apiStartDev(t, func(cfg *server.DevConfig) {
		cfg.DataDir, cfg.Logger = dir, slog.New(slog.NewTextHandler(e.log, nil))
		cfg.EtcdOptions = append(cfg.EtcdOptions, etcdtest.WithLogger(zap.NewNop()))
		cfg.Scheduler = scheduler.Config{Interval: 100 * time.Millisecond, Debounce: 10 * time.Millisecond}
		cfg.Kube = &server.KubeConfig{Kubeconfig: kc.Kubeconfig, Namespace: e.ns, DeleteGrace: 30 * time.Second, LeaseTTL: 5 * time.Second}
	})
	e.dir = dir
	e.etcd = e.etcdClient(t)
	return e
}

// etcdClient is a client of Runway's etcd, closed at cleanup.
func (e *nkEnv) etcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(e.dir, "etcd", "client.sock")},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// agent is the node agent's pod on node and its token, as the chart's
// DaemonSet and the kubelet make them.
func (e *nkEnv) agent(t *testing.T, node string) (*corev1.Pod, string) {
	t.Helper()
	p, tok, err := e.kc.AgentPod(t.Context(), e.ns, server.DefaultAgentServiceAccount, node)
	if err != nil {
		t.Fatal(err)
	}
	return p, tok
}

// nodeManager is the NodeManagerService called with token ("" for none).
func (e *nkEnv) nodeManager(t *testing.T, token string) nodemanagerv1.NodeManagerServiceClient {
	return nodemanagerv1.NewNodeManagerServiceClient(e.dev.conn(t, token))
}

// logged waits until Runway's log has a line holding every part.
func (e *nkEnv) logged(t *testing.T, what string, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for line := range strings.Lines(e.log.String()) {
			if nkHasAll(line, parts...) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Runway's log has no line of %s (%q)", what, parts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func nkHasAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// nkReads records every key and range read through an etcd client (Get,
// the reads of a Txn, Watch): what a node agent learns from etcd.
type nkReads struct {
	mu    sync.Mutex
	reads []clientv3.Op
}

func (r *nkReads) add(ops ...clientv3.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, op := range ops {
		if op.IsGet() || op.IsTxn() {
			r.reads = append(r.reads, op)
		}
		if op.IsTxn() {
			_, then, els := op.Txn()
			r.reads = append(r.reads, then...)
			r.reads = append(r.reads, els...)
		}
	}
}

// covering are the reads whose key or range holds key.
func (r *nkReads) covering(key string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, op := range r.reads {
		if !op.IsGet() {
			continue
		}
		k, end := string(op.KeyBytes()), string(op.RangeBytes())
		if k == key || end != "" && k <= key && (key < end || end == "\x00") {
			out = append(out, k+".."+end)
		}
	}
	return out
}

// record makes cli's reads go through r.
func (r *nkReads) record(cli *clientv3.Client) {
	cli.KV = nkKV{KV: cli.KV, r: r}
	cli.Watcher = nkWatcher{Watcher: cli.Watcher, r: r}
}

type nkKV struct {
	clientv3.KV
	r *nkReads
}

func (k nkKV) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	k.r.add(clientv3.OpGet(key, opts...))
	return k.KV.Get(ctx, key, opts...)
}

func (k nkKV) Do(ctx context.Context, op clientv3.Op) (clientv3.OpResponse, error) {
	k.r.add(op)
	return k.KV.Do(ctx, op)
}

func (k nkKV) Txn(ctx context.Context) clientv3.Txn { return &nkTxn{Txn: k.KV.Txn(ctx), r: k.r} }

type nkTxn struct {
	clientv3.Txn
	r *nkReads
}

func (t *nkTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }

func (t *nkTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.r.add(ops...)
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *nkTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.r.add(ops...)
	t.Txn = t.Txn.Else(ops...)
	return t
}

type nkWatcher struct {
	clientv3.Watcher
	r *nkReads
}

func (w nkWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	w.r.add(clientv3.OpGet(key, opts...))
	return w.Watcher.Watch(ctx, key, opts...)
}
