package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/netcut"
	"github.com/runwayhq/runway/services/nodemanager"
	"github.com/runwayhq/runway/services/nodemanager/agent"
)

// A pod that ended is not run again by a restarted agent (same data
// directory), and its final report, lost meanwhile, is stored again.
func TestRun_restartKeepsFinalState(t *testing.T) {
	f := newFixture(t)
	f.workload(t, "once", "sh", "-c", `echo run >> count; exit 0`)
	f.bind(t, "once")
	stop := f.start(t)
	f.waitRun(t, "once", workloadv1.PodState_POD_STATE_SUCCEEDED)
	stop()
	if _, err := f.etcd.Client.Delete(context.Background(), nodemanager.RunKey("node-1", "team-a", "once", 0)); err != nil {
		t.Fatal(err)
	}
	f.run(t)
	f.waitRun(t, "once", workloadv1.PodState_POD_STATE_SUCCEEDED)
	b, err := os.ReadFile(filepath.Join(f.podDir("once"), "count"))
	if err != nil || string(b) != "run\n" {
		t.Errorf("the pod ran %q (%v), want once", b, err)
	}
}

// etcd unreachable while a pod ends: the final report is retried and
// stored once etcd is back.
func TestRun_reportRetriedUntilStored(t *testing.T) {
	f := newFixture(t)
	px, err := netcut.New(f.etcd.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{px.Addr}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	f.workload(t, "short", "sh", "-c", `while [ ! -e go ]; do sleep 0.05; done; exit 0`)
	f.bind(t, "short")
	f.run(t, func(c *agent.Config) { c.Client = cli })
	f.waitRun(t, "short", workloadv1.PodState_POD_STATE_RUNNING)

	px.Cut()
	if err := os.WriteFile(filepath.Join(f.podDir("short"), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The pod ends (its final state kept on disk) while etcd is out of reach.
	eventually(t, "the pod's final state on disk", func() bool {
		m, _ := filepath.Glob(filepath.Join(f.dataDir, "uid-short.0", "final"))
		return len(m) == 1
	})
	time.Sleep(500 * time.Millisecond) // a few failed tries
	resp, err := f.etcd.Client.Get(context.Background(), nodemanager.RunKey("node-1", "team-a", "short", 0))
	if err != nil {
		t.Fatal(err)
	}
	got := new(nodemanagerv1.ReportWorkloadStateRequest)
	if len(resp.Kvs) != 1 || proto.Unmarshal(resp.Kvs[0].Value, got) != nil || got.GetState() != workloadv1.PodState_POD_STATE_RUNNING {
		t.Fatalf("while cut off, the stored report is %v, want the RUNNING one", got)
	}
	if err := px.Restore(); err != nil {
		t.Fatal(err)
	}
	f.waitRun(t, "short", workloadv1.PodState_POD_STATE_SUCCEEDED)
}

// A finished pod's record, log, working directory and run report are
// collected once its binding and workload are gone; a workload re-created
// under the same name starts from nothing (its own uid).
func TestRun_collectsFinishedPods(t *testing.T) {
	f := newFixture(t)
	f.workload(t, "gone", "sh", "-c", `echo old-output; echo x > file`)
	f.bind(t, "gone")
	f.run(t, func(c *agent.Config) { c.CollectInterval = 50 * time.Millisecond })
	f.waitRun(t, "gone", workloadv1.PodState_POD_STATE_SUCCEEDED)
	for _, p := range []string{filepath.Join(f.dataDir, "uid-gone.0", "output.log"), filepath.Join(f.podDir("gone"), "file")} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("before collection: %v", err)
		}
	}
	time.Sleep(200 * time.Millisecond) // a few collections: the workload still exists, nothing goes
	if _, err := os.Stat(filepath.Join(f.dataDir, "uid-gone.0")); err != nil {
		t.Fatalf("collected while the workload exists: %v", err)
	}
	ctx := context.Background()
	if _, err := f.etcd.Client.Delete(ctx, nodemanager.BindingKey("node-1", "team-a", "gone", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.etcd.Client.Delete(ctx, etcdstore.PrefixWorkloads+"team-a/gone"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod to be collected", func() bool {
		_, err1 := os.Stat(filepath.Join(f.dataDir, "uid-gone.0"))
		_, err2 := os.Stat(f.podDir("gone"))
		resp, err := f.etcd.Client.Get(ctx, nodemanager.RunKey("node-1", "team-a", "gone", 0))
		return os.IsNotExist(err1) && os.IsNotExist(err2) && err == nil && len(resp.Kvs) == 0
	})
}
