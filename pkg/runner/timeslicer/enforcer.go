// Package timeslicer enforces a device's time-slicing plan
// (pkg/timeslice) on local process groups: at each lease boundary it stops
// (SIGSTOP) the groups that must not run and continues (SIGCONT) the one
// that may, so that a plan holds on any machine, GPU or not.
//
// Busy or idle is judged once per plan from CPU time (pkg/procstat): a
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
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runwayhq/runway/pkg/procstat"
	"github.com/runwayhq/runway/pkg/timeslice"
)

// enforcerNice is the enforcer thread's nice value (the default is 0).
const enforcerNice = -10

// Run enforces plan on the process groups pgids (by slot ID; a slot
// without a group is treated as idle) until ctx is done, then continues
// every group. Leases are timed from Run's start.
func Run(ctx context.Context, plan timeslice.Plan, pgids map[string]int) {
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
	groups := make([]int, len(plan.Slots))
	for j, s := range plan.Slots {
		groups[j] = pgids[s.ID]
	}
	running := make([]bool, len(groups)) // what the last signal left each group
	for j := range running {
		running[j] = true // processes start running
	}
	set := func(want []bool) {
		for j, g := range groups { // stop before continuing: never two at once
			if g > 0 && running[j] && !want[j] {
				_ = syscall.Kill(-g, syscall.SIGSTOP)
				running[j] = false
			}
		}
		for j, g := range groups {
			if g > 0 && !running[j] && want[j] {
				_ = syscall.Kill(-g, syscall.SIGCONT)
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
		busy[j] = groups[j] > 0
	}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	before := procstat.GroupCPU(groups...)
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
				now := procstat.GroupCPU(groups...)
				for j, g := range groups {
					if ranBefore[j] > 0 {
						used, alive := now[g]
						busy[j] = alive && (used-before[g])*100 >= ranBefore[j]
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
