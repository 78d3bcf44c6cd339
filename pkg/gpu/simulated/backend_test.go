package simulated_test

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/gpu"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/pkg/procstat"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestBackend_Devices(t *testing.T) {
	b := simulated.New(simulated.Config{Count: 2, Model: "Sim A100", MemoryBytes: 40 << 30, Node: "n1"})
	got, err := b.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d devices, want 2", len(got))
	}
	for i, d := range got {
		if d.Index != i || d.Model != "Sim A100" || d.MemoryBytes != 40<<30 || d.MIG {
			t.Errorf("device %d = %+v", i, d)
		}
	}
	if got[0].UUID == got[1].UUID {
		t.Errorf("devices share UUID %q", got[0].UUID)
	}
	got[0].Model = "changed"
	again, _ := b.Devices()
	if again[0].Model != "Sim A100" {
		t.Error("Devices returned the backend's own slice")
	}
}

func TestBackend_defaults(t *testing.T) {
	got, _ := simulated.New(simulated.Config{Count: 1}).Devices()
	if got[0].Model != simulated.DefaultModel || got[0].MemoryBytes != simulated.DefaultMemoryBytes {
		t.Errorf("device = %+v, want the defaults", got[0])
	}
}

// Sample: memory is what the pod declares in its file, utilisation follows
// its CPU time (the agent's reading): a busy loop near 100%, a sleeper 0.
func TestBackend_Sample(t *testing.T) {
	b := simulated.New(simulated.Config{Count: 1})
	start := func(script string) gpu.Pod {
		dir := t.TempDir()
		c := exec.Command("sh", "-c", script)
		c.Dir = dir
		c.Env = append(os.Environ(), b.PodEnv(dir)...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL); _ = c.Wait() })
		return gpu.Pod{Key: strconv.Itoa(c.Process.Pid), Dir: dir}
	}
	cpu := func(p gpu.Pod) time.Duration { return procstat.GroupCPU(atoi(p.Key))[atoi(p.Key)] }
	busy := start(`echo 1073741824 > "$RUNWAY_GPU_MEMORY_FILE"; while :; do :; done`)
	idle := start(`exec sleep 60`)
	pods := []gpu.Pod{busy, idle}
	// The sleeper's shell uses a little CPU before it becomes sleep.
	for comm := ""; comm != "sleep\n"; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + idle.Key + "/comm")
		comm = string(b)
	}
	sample := func() (gpu.DeviceUsage, error) {
		for i := range pods {
			pods[i].CPU = cpu(pods[i])
		}
		return b.Sample(0, pods)
	}
	if _, err := sample(); err != nil {
		t.Fatal(err)
	}
	var u gpu.DeviceUsage
	deadline := time.Now().Add(10 * time.Second)
	for u.Pods == nil || u.Pods[0].MemoryBytes == 0 || u.Pods[0].Utilization == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("usage = %+v after 10 s", u)
		}
		time.Sleep(500 * time.Millisecond)
		var err error
		if u, err = sample(); err != nil {
			t.Fatal(err)
		}
	}
	if u.Pods[0].MemoryBytes != 1<<30 || u.Pods[1].MemoryBytes != 0 || u.MemoryUsedBytes != 1<<30 {
		t.Errorf("memory = %+v, want 1 GiB for the busy pod only", u)
	}
	if u.Pods[1].Utilization != 0 || u.Utilization != u.Pods[0].Utilization || u.Utilization > 1 {
		t.Errorf("utilization = %+v, want the busy pod's only", u)
	}
	if _, err := b.Sample(1, pods); err == nil {
		t.Error("Sample of a missing device succeeded")
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// An injected device XID makes the device unhealthy; an application's own
// XID (13: illegal address) does not.
func TestBackend_InjectXID(t *testing.T) {
	b := simulated.New(simulated.Config{Count: 2})
	if b.InjectXID(0, 13) || b.Unhealthy() != nil {
		t.Fatalf("XID 13 marked a device unhealthy: %v", b.Unhealthy())
	}
	if !b.InjectXID(1, 79) {
		t.Fatal("XID 79 left the device healthy")
	}
	if got := b.Unhealthy(); len(got) != 1 || got[1] != "XID 79: GPU has fallen off the bus" {
		t.Errorf("Unhealthy() = %v, want device 1 with XID 79", got)
	}
}
