package timeslicer_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/runwayhq/runway/pkg/procstat"
	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/pkg/runner/timeslicer"
	"github.com/runwayhq/runway/pkg/timeslice"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	busyLoop = `while :; do :; done`
	// The test's lease: a 500 ms plan at 5%, 20 plans in the 10 s measured.
	lease   = 25 * time.Millisecond
	measure = 10 * time.Second
)

// start runs script as a pod and returns its process group. Every pod of
// a test runs on the same CPU, so that they meet the same machine load: on
// different CPUs the kernel's per-CPU queues give them unequal time.
func start(t *testing.T, r *local.Runner, id, script string) int {
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
	return p.Pid()
}

// enforce runs the plan of sharers over the groups and returns the CPU
// time each group used during the measured 10 s, which starts after 2.5
// plans.
func enforce(t *testing.T, mode timeslice.Mode, sharers []timeslice.Sharer, pgids map[string]int, others ...int) map[int]time.Duration {
	t.Helper()
	plan, err := timeslice.New(mode, lease, 5, sharers)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); timeslicer.Run(ctx, plan, pgids) }()
	defer func() { cancel(); wg.Wait() }()
	groups := others
	for _, g := range pgids {
		groups = append(groups, g)
	}
	// Fair mode knows who is idle after two plans; the measured window, a
	// whole number of plans, may start anywhere in a plan.
	time.Sleep(5 * plan.Duration() / 2)
	before := procstat.GroupCPU(groups...)
	time.Sleep(measure)
	after := procstat.GroupCPU(groups...)
	used := map[int]time.Duration{}
	for _, g := range groups {
		used[g] = after[g] - before[g]
	}
	return used
}

// Strict: two CPU-bound pods with fractions 0.25 and 0.75 use CPU time in
// the ratio 1:3, within 10%. Both compete with the same machine load in
// their own leases, so the ratio holds on a loaded box.
func TestRun_strictRatio(t *testing.T) {
	r, err := local.New(local.Config{DataDir: t.TempDir(), StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a, b := start(t, r, "a", busyLoop), start(t, r, "b", busyLoop)
	used := enforce(t, timeslice.Strict,
		[]timeslice.Sharer{{ID: "a", FractionMilli: 250}, {ID: "b", FractionMilli: 750}},
		map[string]int{"a": a, "b": b})
	if used[b] == 0 {
		t.Fatalf("the 0.75 pod used no CPU")
	}
	ratio := float64(used[a]) / float64(used[b])
	t.Logf("CPU used in %v: 0.25 pod %v, 0.75 pod %v, ratio %.3f (want 0.333)", measure, used[a], used[b], ratio)
	if ratio < 0.9/3 || ratio > 1.1/3 {
		t.Errorf("CPU ratio = %.3f, want 1:3 within 10%% (%.3f to %.3f)", ratio, 0.9/3, 1.1/3)
	}
}

// Fair: with the 0.75 pod sleeping, the busy 0.25 pod gets at least 90% of
// the time. "The time" is measured as the CPU time of an unrestricted
// CPU-bound process running alongside on the same CPU, which sees the same
// machine load.
func TestRun_fairIdleLeasesGoToBusy(t *testing.T) {
	r, err := local.New(local.Config{DataDir: t.TempDir(), StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	a, b := start(t, r, "a", busyLoop), start(t, r, "b", "exec sleep 60")
	ref := start(t, r, "ref", busyLoop)
	used := enforce(t, timeslice.Fair,
		[]timeslice.Sharer{{ID: "a", FractionMilli: 250}, {ID: "b", FractionMilli: 750}},
		map[string]int{"a": a, "b": b}, ref)
	share := float64(used[a]) / float64(used[ref])
	t.Logf("CPU used in %v: 0.25 pod %v, unrestricted reference %v, share %.3f", measure, used[a], used[ref], share)
	if share < 0.9 {
		t.Errorf("the busy 0.25 pod got %.0f%% of the time, want at least 90%%", share*100)
	}
	// The same pods in strict mode: the 0.25 pod is held to its fraction.
	used = enforce(t, timeslice.Strict,
		[]timeslice.Sharer{{ID: "a", FractionMilli: 250}, {ID: "b", FractionMilli: 750}},
		map[string]int{"a": a, "b": b}, ref)
	share = float64(used[a]) / float64(used[ref])
	t.Logf("strict: 0.25 pod %v, reference %v, share %.3f", used[a], used[ref], share)
	if share > 0.35 {
		t.Errorf("strict: the 0.25 pod got %.0f%% of the time, want about 25%%", share*100)
	}
}
