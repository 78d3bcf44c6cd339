package timeslicer_test

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/pkg/runner/timeslicer"
	"github.com/runwayhq/runway/pkg/timeslice"
)

// TestMain raises the priority of the test's threads (the enforcer's)
// where it may, as an agent's should be: on a loaded machine a late
// enforcer lengthens leases. Threads started later inherit it.
func TestMain(m *testing.M) {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		if tid, err := strconv.Atoi(task.Name()); err == nil {
			_ = unix.Setpriority(unix.PRIO_PROCESS, tid, -10)
		}
	}
	goleak.VerifyTestMain(m)
}

const (
	busyLoop = `while :; do :; done`
	// The test's lease: a 2 s plan at 5%, 5 plans in the 10 s measured.
	// Leases much shorter than the product's 250 ms make the enforcer's
	// wake-up jitter (a few ms on a loaded machine) a large share of each.
	lease   = 100 * time.Millisecond
	measure = 10 * time.Second
)

// start runs script as a pod.
func start(t *testing.T, r *local.Runner, id, script string) *local.Process {
	t.Helper()
	p, err := r.Start(local.Spec{ID: id, Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	var cpu unix.CPUSet
	cpu.Set(runtime.NumCPU() - 1)
	if err := unix.SchedSetaffinity(p.Pid(), &cpu); err != nil {
		t.Fatal(err)
	}
	return p.(*local.Process)
}

// usage is what a pod got during the measured window.
type usage struct {
	cpu time.Duration // CPU time, from /proc/<pid>/stat: what the tests assert
	// runnable is CPU time plus time waiting for a CPU, from
	// /proc/<pid>/schedstat: roughly the time the plan let the pod run,
	// logged to tell enforcement from machine load when a test fails.
	runnable time.Duration
}

// schedstat returns a process's time on a CPU plus its time waiting on a
// run queue (the test pods are single processes).
func schedstat(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		t.Fatalf("schedstat %q", b)
	}
	onCPU, err1 := strconv.ParseInt(f[0], 10, 64)
	waiting, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("schedstat %q", b)
	}
	return time.Duration(onCPU + waiting)
}

// enforce runs the plan of sharers over the groups and returns what each
// of them and of others used during the measured 10 s, which starts after
// 2.5 plans.
func enforce(t *testing.T, mode timeslice.Mode, sharers []timeslice.Sharer, pods map[string]*local.Process, others ...*local.Process) map[*local.Process]usage {
	t.Helper()
	plan, err := timeslice.New(mode, lease, 5, sharers)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	groups := others
	gs := map[string]timeslicer.Group{}
	for id, p := range pods {
		groups = append(groups, p)
		gs[id] = p
	}
	go func() { defer wg.Done(); timeslicer.Run(ctx, plan, gs) }()
	defer func() { cancel(); wg.Wait() }()
	// Fair mode knows who is idle after two plans; the measured window, a
	// whole number of plans, may start anywhere in a plan.
	time.Sleep(5 * plan.Duration() / 2)
	before := map[*local.Process]time.Duration{}
	ran := map[*local.Process]time.Duration{}
	for _, g := range groups {
		before[g], ran[g] = g.CPU(), schedstat(t, g.Pid())
	}
	time.Sleep(measure)
	used := map[*local.Process]usage{}
	for _, g := range groups {
		used[g] = usage{cpu: g.CPU() - before[g], runnable: schedstat(t, g.Pid()) - ran[g]}
	}
	return used
}

// Strict: two CPU-bound pods with fractions 0.25 and 0.75 use CPU time in
// the ratio 1:3, within 10%. The same holds when the 0.25 pod's work runs
// in a grandchild that left its session (setsid, double fork): the freezer
// holds the pod's cgroup whatever its processes do.
func TestRun_strictRatio(t *testing.T) {
	for name, script := range map[string]string{
		"plain": busyLoop,
		// The fork waits for start's CPU affinity, which children inherit.
		"escaped": `sleep 0.3; (setsid sh -c '` + busyLoop + `' &); exec sleep 600`,
	} {
		t.Run(name, func(t *testing.T) {
			r, err := local.New(local.Config{DataDir: t.TempDir(), StopGrace: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if name == "escaped" && !strings.HasPrefix(r.Tracking(), "cgroup") {
				t.Fatalf("this machine has no writable cgroup v2 hierarchy (tracking %q): the escape test needs one", r.Tracking())
			}
			a, b := start(t, r, "a", script), start(t, r, "b", busyLoop)
			used := enforce(t, timeslice.Strict,
				[]timeslice.Sharer{{ID: "a", FractionMilli: 250}, {ID: "b", FractionMilli: 750}},
				map[string]*local.Process{"a": a, "b": b})
			if used[b].cpu == 0 {
				t.Fatalf("the 0.75 pod used no CPU: %+v", used[b])
			}
			ratio := float64(used[a].cpu) / float64(used[b].cpu)
			t.Logf("in %v: CPU time 0.25 pod %v, 0.75 pod %v: ratio %.3f, want 0.333 (runnable %v and %v: %.3f)", measure,
				used[a].cpu, used[b].cpu, ratio, used[a].runnable, used[b].runnable, float64(used[a].runnable)/float64(used[b].runnable))
			if ratio < 0.9/3 || ratio > 1.1/3 {
				t.Errorf("CPU ratio = %.3f, want 1:3 within 10%% (%.3f to %.3f)", ratio, 0.9/3, 1.1/3)
			}
		})
	}
}

// Fair: with the 0.75 pod sleeping, the busy 0.25 pod gets at least 90% of
// the time. "The time" is the CPU time of an unrestricted CPU-bound
// process running alongside on the same CPU, which meets the same machine
// load. The same pods in strict mode hold the 0.25 pod to its leases.
func TestRun_fairIdleLeasesGoToBusy(t *testing.T) {
	r, err := local.New(local.Config{DataDir: t.TempDir(), StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a, b := start(t, r, "a", busyLoop), start(t, r, "b", "exec sleep 60")
	ref := start(t, r, "ref", busyLoop)
	sharers := []timeslice.Sharer{{ID: "a", FractionMilli: 250}, {ID: "b", FractionMilli: 750}}
	used := enforce(t, timeslice.Fair, sharers, map[string]*local.Process{"a": a, "b": b}, ref)
	share := float64(used[a].cpu) / float64(used[ref].cpu)
	t.Logf("fair: in %v the 0.25 pod used %v CPU, the reference %v: %.0f%% (runnable %v)", measure, used[a].cpu, used[ref].cpu, share*100, used[a].runnable)
	if share < 0.9 {
		t.Errorf("fair: the busy 0.25 pod got %.0f%% of the time, want at least 90%%", share*100)
	}
	// Strict: running a quarter of the time, sharing the CPU with the
	// reference then, it gets 1/8 where the reference gets 7/8: 1/7 of it.
	used = enforce(t, timeslice.Strict, sharers, map[string]*local.Process{"a": a, "b": b}, ref)
	share = float64(used[a].cpu) / float64(used[ref].cpu)
	t.Logf("strict: the 0.25 pod used %v CPU, the reference %v: %.3f, want 0.143 (runnable %v)", used[a].cpu, used[ref].cpu, share, used[a].runnable)
	if share > 0.2 {
		t.Errorf("strict: the 0.25 pod used %.3f of the reference's CPU time, want about 1/7", share)
	}
}
