package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/services/nodemanager"
	"github.com/runwayhq/runway/services/nodemanager/agent"
)

// agentProcessEnv makes the test binary a node agent of its own (the
// config as JSON), so that a test can SIGKILL it as kill -9 does.
const agentProcessEnv = "RUNWAY_TEST_AGENT_PROCESS"

type agentProcess struct{ Endpoint, DataDir, WorkDir string }

// runAgentProcess runs the agent of node-1 until it is killed.
func runAgentProcess() int {
	var ap agentProcess
	if err := json.Unmarshal([]byte(os.Getenv(agentProcessEnv)), &ap); err != nil {
		fmt.Println(err)
		return 1
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ap.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	err = agent.Run(context.Background(), agent.Config{Node: "node-1", Client: cli, DataDir: ap.DataDir, WorkDir: ap.WorkDir,
		Backend: simulated.New(simulated.Config{Count: 4}), LeaseTTL: time.Second, StopGrace: time.Second,
		PodUIDs: local.DefaultUIDs, Logger: slog.New(slog.NewTextHandler(os.Stdout, nil))})
	fmt.Println(err)
	return 1
}

// startAgentProcess starts the agent of node-1 as a process of its own,
// in its own process group.
func (f *fixture) startAgentProcess(t *testing.T) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(agentProcess{Endpoint: f.etcd.Endpoint, DataDir: f.dataDir, WorkDir: f.workDir})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), agentProcessEnv+"="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logged := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(bufio.NewReader(out))
		logged <- string(b)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("the killed agent's log:\n%s", <-logged)
		}
	})
	return cmd
}

// ledger is a file every pod's user may append to, outside the pods'
// working directories: how many times each pod ran.
func ledger(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "runway-agent-ledger-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(d, "ran")
	if err := os.WriteFile(f, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(f, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	return f
}

// lastRun is pod 0's stored run report.
func (f *fixture) lastRun(t *testing.T, id string) *nodemanagerv1.ReportWorkloadStateRequest {
	t.Helper()
	resp, err := f.etcd.Client.Get(context.Background(), nodemanager.RunKey("node-1", "team-a", id, 0))
	if err != nil {
		t.Fatal(err)
	}
	r := new(nodemanagerv1.ReportWorkloadStateRequest)
	if len(resp.Kvs) == 1 {
		if err := proto.Unmarshal(resp.Kvs[0].Value, r); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func ranCount(t *testing.T, ledger, id string) int {
	t.Helper()
	b, err := os.ReadFile(ledger)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(b), id+"\n")
}

// The agent is SIGKILLed (its process group) while three pods run, and
// started again on the same data directory: the pod still running is
// adopted (not killed, not run again) and its end reported; the one that
// ended while no agent ran reports its own exit, not run again; the one
// whose processes died with the agent is run again once, its reports
// saying so (agent_restarts), and counted.
func TestRun_adoptsPodsAfterKill9(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the agent runs pods under their own uids as root")
	}
	f := newFixture(t)
	led := ledger(t)
	logRun := func(id string) string { return fmt.Sprintf(`echo %s >> %s; `, id, led) }
	f.workload(t, "runs", "sh", "-c", logRun("runs")+`while [ ! -e go ]; do sleep 0.05; done`)
	f.workload(t, "ends", "sh", "-c", logRun("ends")+`while [ ! -e go ]; do sleep 0.05; done; exit 3`)
	f.workload(t, "dies", "sh", "-c", logRun("dies")+`exec sleep 600`)
	for _, id := range []string{"runs", "ends", "dies"} {
		f.bind(t, id)
	}
	first := f.startAgentProcess(t)
	for _, id := range []string{"runs", "ends", "dies"} {
		f.waitRun(t, id, workloadv1.PodState_POD_STATE_RUNNING)
		eventually(t, id+" in the ledger", func() bool { return ranCount(t, led, id) == 1 })
	}
	if err := syscall.Kill(-first.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	// While no agent runs: "ends" ends, and "dies" dies as with its node
	// (its shim and its process).
	if err := os.WriteFile(filepath.Join(f.podDir("ends"), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ends's exit recorded", func() bool {
		_, err := os.Stat(filepath.Join(f.dataDir, "uid-ends.0", local.ExitName))
		return err == nil
	})
	var rec struct{ Shim, Leader int }
	b, err := os.ReadFile(filepath.Join(f.dataDir, "uid-dies.0", local.RunName))
	if err != nil || json.Unmarshal(b, &rec) != nil || rec.Shim <= 1 || rec.Leader <= 1 {
		t.Fatalf("dies's run record %q: %v", b, err)
	}
	for _, pid := range []int{rec.Shim, rec.Leader} {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		eventually(t, "dies's processes dead", func() bool {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			return err != nil || strings.Contains(string(st), ") Z ")
		})
	}

	t.Cleanup(func() {
		if t.Failed() {
			for _, id := range []string{"runs", "ends", "dies"} {
				t.Logf("%s: %v", id, f.lastRun(t, id))
			}
		}
	})
	restarts := agent.NewRestarts()
	f.run(t, func(c *agent.Config) { c.PodUIDs = local.DefaultUIDs; c.Restarts = restarts })
	if r := f.waitRun(t, "ends", workloadv1.PodState_POD_STATE_FAILED); r.GetExitCode() != 3 || r.GetAgentRestarts() != 0 {
		t.Errorf("ends: exit code %d, %d restarts; want 3 (its own), 0", r.GetExitCode(), r.GetAgentRestarts())
	}
	eventually(t, "dies reported RUNNING again, restarted once", func() bool {
		r := f.lastRun(t, "dies")
		return r.GetState() == workloadv1.PodState_POD_STATE_RUNNING && r.GetAgentRestarts() == 1
	})
	eventually(t, "dies run again", func() bool { return ranCount(t, led, "dies") == 2 })
	if n := testutil.ToFloat64(restarts.WithLabelValues("node-1")); n != 1 {
		t.Errorf("runway_agent_pod_restarts_total = %v, want 1", n)
	}
	if r := f.lastRun(t, "runs"); r.GetState() != workloadv1.PodState_POD_STATE_RUNNING || r.GetAgentRestarts() != 0 {
		t.Fatalf("runs: %v, want RUNNING with 0 restarts (adopted)", r)
	}
	if err := os.WriteFile(filepath.Join(f.podDir("runs"), "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.waitRun(t, "runs", workloadv1.PodState_POD_STATE_SUCCEEDED)
	for id, want := range map[string]int{"runs": 1, "ends": 1, "dies": 2} {
		if n := ranCount(t, led, id); n != want {
			t.Errorf("%s ran %d times, want %d", id, n, want)
		}
	}
}
