// Package timeslicer enforces a device's time-slicing plan
// (pkg/timeslice) on local pods: at each lease boundary it freezes the
// pods that must not run and thaws the one that may (the pod's cgroup
// freezer, or SIGSTOP/SIGCONT to each of its processes where it has no
// cgroup; a container is paused by its engine: the freezer cgroup of the
// whole container), so that a plan holds on any machine, GPU or not.
//
// Busy or idle is judged once per plan from the pod's CPU time: a
// group that used less than 1% of the time it was allowed to run is idle.
// The judgement of a plan is made during the first lease of the next, so it
// shapes the plan after that. In strict mode it changes nothing. In fair
// mode an idle group's leases go to the busy ones and the idle group is
// left running (it is not using the device); when it wakes up it is busy
// again two plans later at most.
package timeslicer

import (
	"context"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runwayhq/runway/pkg/timeslice"
)

// Group is one pod as the enforcer drives it (a pkg/runner.Pod: a local
// process, or a container that Freeze pauses through its engine).
type Group interface {
	// Freeze stops (true) or continues (false) every process of the pod.
	Freeze(on bool)
	// CPU is the CPU time the pod has used so far.
	CPU() time.Duration
	// Done is closed once the pod has ended.
	Done() <-chan struct{}
}

// enforcerNice is the enforcer thread's nice value (the default is 0).
const enforcerNice = -10

// Run enforces plan on pods (by slot ID; a slot without a pod is treated
// as idle) until ctx is done, then continues every pod. Leases are timed
// from Run's start.
func Run(ctx context.Context, plan timeslice.Plan, pods map[string]Group) {
	// A late wake-up lengthens a lease: on a loaded machine the enforcer
	// must win the CPU at lease boundaries. Its goroutine keeps one thread
	// and raises that thread's priority where the agent may (root,
	// CAP_SYS_NICE); elsewhere it runs at the normal one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	if unix.Setpriority(unix.PRIO_PROCESS, tid, enforcerNice) == nil {
		defer func() { _ = unix.Setpriority(unix.PRIO_PROCESS, tid, 0) }() // runs before the unlock
	}
	groups := make([]Group, len(plan.Slots))
	for j, s := range plan.Slots {
		groups[j] = pods[s.ID]
	}
	running := make([]bool, len(groups)) // what the last signal left each group
	for j := range running {
		running[j] = true // processes start running
	}
	set := func(want []bool) {
		for j, g := range groups { // stop before continuing: never two at once
			if g != nil && running[j] && !want[j] {
				g.Freeze(true)
				running[j] = false
			}
		}
		for j, g := range groups {
			if g != nil && !running[j] && want[j] {
				g.Freeze(false)
				running[j] = true
			}
		}
	}
	defer func() {
		all := make([]bool, len(groups))
		for j := range all {
			all[j] = true
		}
		set(all)
	}()

	busy := make([]bool, len(groups))
	for j := range busy {
		busy[j] = groups[j] != nil
	}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	before := cpuOf(groups)
	var ranBefore []time.Duration // per group, in the previous plan
	for round := 0; ; round++ {
		planBusy := slices.Clone(busy)
		ranFor := make([]time.Duration, len(groups))
		for i, owner := range plan.Schedule(planBusy, round) {
			want := make([]bool, len(groups))
			for j := range want {
				want[j] = j == owner || (plan.Mode == timeslice.Fair && !planBusy[j])
				if want[j] {
					ranFor[j] += plan.Lease
				}
			}
			set(want)
			if i == 0 && ranBefore != nil {
				// Judge the previous plan only now that this lease has
				// begun: a /proc scan at the boundary would shorten it.
				now := cpuOf(groups)
				for j, g := range groups {
					if ranBefore[j] > 0 {
						busy[j] = alive(g) && (now[j]-before[j])*100 >= ranBefore[j]
					}
				}
				before = now
			}
			end := start.Add(time.Duration(round*plan.Leases+i+1) * plan.Lease)
			timer.Reset(time.Until(end))
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		ranBefore = ranFor
	}
}

// cpuOf is each pod's CPU time so far (0 for a missing one).
func cpuOf(groups []Group) []time.Duration {
	out := make([]time.Duration, len(groups))
	for j, g := range groups {
		if g != nil {
			out[j] = g.CPU()
		}
	}
	return out
}

func alive(g Group) bool {
	if g == nil {
		return false
	}
	select {
	case <-g.Done():
		return false
	default:
		return true
	}
}
