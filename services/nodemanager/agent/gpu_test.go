package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/gpumetrics"
	"github.com/runwayhq/runway/services/nodemanager/agent"
)

// A pod that declares more GPU memory than its slice is ended and its
// report says why; one within its slice keeps running. Both get their
// limit in RUNWAY_GPU_MEMORY_LIMIT_BYTES, and the memory shows in the
// Prometheus series.
func TestRun_memorySlice(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	m, err := gpumetrics.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f.run(t, func(c *agent.Config) { c.SampleInterval = 50 * time.Millisecond; c.Metrics = m })
	// Half of a simulated 80 GiB device: a 40 GiB slice.
	script := func(bytes string) string {
		return `echo $RUNWAY_GPU_MEMORY_LIMIT_BYTES > limit; echo ` + bytes + ` > "$RUNWAY_GPU_MEMORY_FILE"; exec sleep 60`
	}
	f.workload(t, "hog", "sh", "-c", script("50000000000"))
	f.workload(t, "fits", "sh", "-c", script("30000000000"))
	f.bindShare(t, "fits", 1, 500)
	f.bindShare(t, "hog", 1, 500)

	got := f.waitRun(t, "hog", workloadv1.PodState_POD_STATE_FAILED)
	if !strings.Contains(got.GetMessage(), "Out of GPU memory") || !strings.Contains(got.GetMessage(), "46.6 GiB on GPU 1, over its slice of 40.0 GiB") {
		t.Errorf("hog report = %v, want an out-of-memory message", got)
	}
	if got.GetExitCode() != 137 {
		t.Errorf("hog exit code = %d, want 137 (SIGKILL)", got.GetExitCode())
	}
	for _, id := range []string{"hog", "fits"} {
		b, err := os.ReadFile(filepath.Join(f.podDir(id), "limit"))
		if err != nil || strings.TrimSpace(string(b)) != "42949672960" {
			t.Errorf("%s: RUNWAY_GPU_MEMORY_LIMIT_BYTES = %q (%v), want 42949672960", id, b, err)
		}
	}
	fits := map[string]string{"node": "node-1", "device": "1", "project": "team-a", "workload": "fits", "pod": "0"}
	eventually(t, "the fits pod's memory series", func() bool {
		v, ok := gauge(t, reg, "runway_gpu_memory_used_bytes", fits)
		return ok && v == 30000000000
	})
	if _, ok := gauge(t, reg, "runway_gpu_idle_seconds_per_workload", fits); !ok {
		t.Error("no idle-time series for the fits pod")
	}
	eventually(t, "device 1's memory without the hog", func() bool {
		v, ok := gauge(t, reg, "runway_gpu_memory_used_bytes", map[string]string{"node": "node-1", "device": "1", "project": "", "workload": "", "pod": ""})
		return ok && v == 30000000000
	})
	time.Sleep(300 * time.Millisecond) // six more samples
	if got := f.waitRun(t, "fits", workloadv1.PodState_POD_STATE_RUNNING); got.GetMessage() != "" {
		t.Errorf("fits report = %v, want RUNNING untouched", got)
	}
	if _, ok := gauge(t, reg, "runway_gpu_memory_used_bytes", map[string]string{"node": "node-1", "device": "1", "project": "team-a", "workload": "hog", "pod": "0"}); ok {
		t.Error("the ended hog pod still has series")
	}
}

// gauge returns the value of the series of name with exactly labels.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// GPU idle time is reported through the run report: a sleeping pod's grows
// window by window, a busy pod's stays 0. Windows are shortened to 200 ms.
func TestRun_idleTimeReported(t *testing.T) {
	f := newFixture(t)
	const window = 200 * time.Millisecond
	f.run(t, func(c *agent.Config) { c.SampleInterval = 20 * time.Millisecond; c.IdleWindow = window })
	f.workload(t, "idle", "sleep", "60")
	f.workload(t, "busy", "sh", "-c", `while :; do :; done`)
	f.bindShare(t, "idle", 0, 1000)
	f.bindShare(t, "busy", 2, 1000)
	var idle time.Duration
	eventually(t, "the idle pod to report three idle windows", func() bool {
		r := f.waitRun(t, "idle", workloadv1.PodState_POD_STATE_RUNNING)
		idle = r.GetGpuIdleTime().AsDuration()
		return idle >= 3*window
	})
	if idle%window != 0 {
		t.Errorf("reported idle time %v is not whole windows of %v", idle, window)
	}
	if r := f.waitRun(t, "busy", workloadv1.PodState_POD_STATE_RUNNING); r.GetGpuIdleTime().AsDuration() != 0 {
		t.Errorf("busy pod reported idle time %v, want 0", r.GetGpuIdleTime().AsDuration())
	}
}

// Under an MPS control daemon the pod gets MPS limits (memory per device,
// thread percentage) and the agent leaves it to the daemon: a pod over its
// slice is not ended.
func TestRun_mpsLimits(t *testing.T) {
	f := newFixture(t)
	f.run(t, func(c *agent.Config) { c.SampleInterval = 20 * time.Millisecond; c.MPSPipeDir = "/tmp/mps-pipe" })
	f.workload(t, "mps", "sh", "-c", `echo "$CUDA_MPS_PIPE_DIRECTORY|$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE|$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" > env.tmp; mv env.tmp env
echo 60000000000 > "$RUNWAY_GPU_MEMORY_FILE"; exec sleep 60`)
	f.bindShare(t, "mps", 2, 250)
	var env []byte
	eventually(t, "the pod's MPS environment", func() bool {
		var err error
		env, err = os.ReadFile(filepath.Join(f.podDir("mps"), "env"))
		return err == nil
	})
	if want := "/tmp/mps-pipe|25|0=20480M\n"; string(env) != want {
		t.Errorf("MPS environment = %q, want %q", env, want)
	}
	time.Sleep(200 * time.Millisecond) // ten samples over its 20 GiB slice
	if got := f.waitRun(t, "mps", workloadv1.PodState_POD_STATE_RUNNING); got.GetMessage() != "" {
		t.Errorf("report = %v, want RUNNING: MPS enforces the limit", got)
	}
}
