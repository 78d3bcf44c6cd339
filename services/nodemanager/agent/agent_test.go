package agent_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/services/nodemanager"
	"github.com/runwayhq/runway/services/nodemanager/agent"
)

func TestMain(m *testing.M) {
	if os.Getenv(agentProcessEnv) != "" {
		os.Exit(runAgentProcess())
	}
	goleak.VerifyTestMain(m)
}

type fixture struct {
	etcd    *etcdtest.Cluster
	dataDir string
	workDir string // outside dataDir, crossable by the pods' user
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	work, err := os.MkdirTemp("", "runway-agent-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(work) })
	if err := os.Chmod(work, 0o711); err != nil {
		t.Fatal(err)
	}
	return &fixture{etcd: etcdtest.New(t), dataDir: t.TempDir(), workDir: filepath.Join(work, "pods")}
}

// podDir is the working directory of pod 0 of workload id.
func (f *fixture) podDir(id string) string { return filepath.Join(f.workDir, "uid-"+id+".0") }

// run starts the agent of node-1 until the test ends; opts adjust its
// configuration.
func (f *fixture) run(t *testing.T, opts ...func(*agent.Config)) { t.Helper(); f.start(t, opts...) }

// start starts the agent of node-1 and returns what stops it (also called
// when the test ends).
func (f *fixture) start(t *testing.T, opts ...func(*agent.Config)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := agent.Config{
		Node: "node-1", Client: f.etcd.Client, DataDir: f.dataDir, WorkDir: f.workDir,
		Backend:  simulated.New(simulated.Config{Count: 4}),
		LeaseTTL: time.Second, StopGrace: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	go func() { done <- agent.Run(ctx, cfg) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// workload writes a workload key as the workload service would.
func (f *fixture) workload(t *testing.T, id string, command ...string) {
	t.Helper()
	c := etcdstore.NewCollection(f.etcd.Client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	w := &workloadv1.Workload{Name: "projects/team-a/workloads/" + id, Uid: "uid-" + id, Spec: &workloadv1.WorkloadSpec{Command: command}}
	if _, err := c.Create(context.Background(), "team-a/"+id, w); err != nil {
		t.Fatal(err)
	}
}

// bind writes a binding of pod 0 on GPU 1, as the scheduler would.
func (f *fixture) bind(t *testing.T, id string) { f.bindShare(t, id, 1, 1000) }

// bindShare writes a binding of pod 0 on GPU device with a fraction.
func (f *fixture) bindShare(t *testing.T, id string, device int32, milli int32) {
	t.Helper()
	v, err := proto.Marshal(&workloadv1.PodStatus{Index: 0, Node: "nodes/node-1", DeviceIndexes: []int32{device},
		FractionMilli: milli, State: workloadv1.PodState_POD_STATE_BOUND})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.etcd.Client.Put(context.Background(), nodemanager.BindingKey("node-1", "team-a", id, 0), string(v)); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 15*time.Second, what, cond)
}

// eventuallyWithin is eventually with its own deadline, for waits on an
// outside engine (podman starting and pausing containers on a loaded
// machine).
func eventuallyWithin(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// waitRun waits for pod 0's run report to reach state.
func (f *fixture) waitRun(t *testing.T, id string, state workloadv1.PodState) *nodemanagerv1.ReportWorkloadStateRequest {
	t.Helper()
	got := new(nodemanagerv1.ReportWorkloadStateRequest)
	eventually(t, id+" to report "+state.String(), func() bool {
		resp, err := f.etcd.Client.Get(context.Background(), nodemanager.RunKey("node-1", "team-a", id, 0))
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		return proto.Unmarshal(resp.Kvs[0].Value, got) == nil && got.GetState() == state
	})
	return got
}

func TestRun_bindingStartsPod(t *testing.T) {
	f := newFixture(t)
	f.workload(t, "train-1", "sh", "-c", `echo $CUDA_VISIBLE_DEVICES > out; echo boom; exit 3`)
	f.bind(t, "train-1") // before the agent starts: found by its first listing
	f.run(t)

	got := f.waitRun(t, "train-1", workloadv1.PodState_POD_STATE_FAILED)
	if got.GetExitCode() != 3 || got.GetMessage() != "boom" || got.GetNode() != "nodes/node-1" {
		t.Errorf("report = %v, want FAILED with exit code 3 and message boom", got)
	}
	out, err := os.ReadFile(filepath.Join(f.podDir("train-1"), "out"))
	if err != nil || string(out) != "1\n" {
		t.Errorf("CUDA_VISIBLE_DEVICES = %q (%v), want 1", out, err)
	}
}

func TestRun_missingWorkloadFails(t *testing.T) {
	f := newFixture(t)
	f.run(t)
	f.bind(t, "ghost")
	if got := f.waitRun(t, "ghost", workloadv1.PodState_POD_STATE_FAILED); !strings.Contains(got.GetMessage(), "read workload") {
		t.Errorf("report = %v, want a failed read", got)
	}
}

func TestRun_deletedBindingStopsPod(t *testing.T) {
	f := newFixture(t)
	f.run(t)
	f.workload(t, "serve-1", "sh", "-c", `sleep 60 & echo $! > child.tmp; mv child.tmp child; wait`)
	f.bind(t, "serve-1") // after the agent starts: seen by its watch
	f.waitRun(t, "serve-1", workloadv1.PodState_POD_STATE_RUNNING)
	var child int
	eventually(t, "the child's pid", func() bool {
		b, err := os.ReadFile(filepath.Join(f.podDir("serve-1"), "child"))
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})

	if _, err := f.etcd.Client.Delete(context.Background(), nodemanager.BindingKey("node-1", "team-a", "serve-1", 0)); err != nil {
		t.Fatal(err)
	}
	got := f.waitRun(t, "serve-1", workloadv1.PodState_POD_STATE_STOPPED)
	if int(got.GetExitCode()) != 128+int(syscall.SIGTERM) {
		t.Errorf("report = %v, want exit code %d", got, 128+int(syscall.SIGTERM))
	}
	eventually(t, "sleep 60 to be killed", func() bool { return !alive(child) })
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestRun_restartStartsNoPodTwice: an agent started again (after a crash
// or a restart) does not run again the pod of a binding that it ran to
// the end; a pod whose last report says it was running (its process lost
// with the agent) is started again.
func TestRun_restartStartsNoPodTwice(t *testing.T) {
	f := newFixture(t)
	led := ledger(t)
	f.workload(t, "once", "sh", "-c", "echo once >> "+led)
	f.workload(t, "lost", "sh", "-c", "echo lost >> "+led)
	f.bind(t, "once")

	stop := f.start(t)
	f.waitRun(t, "once", workloadv1.PodState_POD_STATE_SUCCEEDED)
	stop()

	// "lost" was running when its agent died: bound, then reported RUNNING.
	f.bindShare(t, "lost", 2, 1000)
	if err := nodemanager.PutRun(context.Background(), f.etcd.Client, &nodemanagerv1.ReportWorkloadStateRequest{
		Node: "nodes/node-1", Workload: "projects/team-a/workloads/lost", PodIndex: 0,
		State: workloadv1.PodState_POD_STATE_RUNNING}); err != nil {
		t.Fatal(err)
	}
	f.run(t)
	f.waitRun(t, "lost", workloadv1.PodState_POD_STATE_SUCCEEDED)
	time.Sleep(300 * time.Millisecond) // time to (wrongly) start "once" again
	if b, err := os.ReadFile(led); err != nil || string(b) != "once\nlost\n" {
		t.Errorf("pods ran %q (%v), want once, then lost again", b, err)
	}
}
