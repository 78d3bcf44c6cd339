package scheduling

import (
	"fmt"

	"github.com/runwayhq/runway/pkg/cluster"
)

// InvariantError is what the cycle panics with when a rule it relies on
// does not hold (a bug, or a model that is not what it should be). It
// names the workload the failing step was working on and the step, so a
// caller that recovers can set that workload aside and go on with the
// others. Cycle turns every panic of a step into one.
type InvariantError struct {
	Workload string // cluster ID of the workload the step worked on ("" outside any step)
	Step     Step
	What     string
}

func (e InvariantError) Error() string {
	if e.Workload == "" {
		return fmt.Sprintf("scheduling invariant failed: %s", e.What)
	}
	return fmt.Sprintf("scheduling invariant failed in %s for %s: %s", e.Step, e.Workload, e.What)
}

// Step names the part of a cycle that takes up one workload at a time.
type Step string

// The steps of a cycle (SCHEDULING.md §3).
const (
	StepGangMinimum Step = "gang-minimum"
	StepAllocate    Step = "allocate"
	StepReclaim     Step = "reclaim"
	StepPreempt     Step = "preempt"
	StepConsolidate Step = "consolidate"
)

// on records the step and the workload it takes up: a panic from here on
// is that workload's (see Cycle).
func (c *cycle) on(step Step, w *cluster.Workload) {
	c.step, c.subject = step, w
	if c.cfg.Observe != nil {
		c.cfg.Observe(step, w.ID)
	}
}

// contain turns what a step panicked with into an InvariantError naming
// the step and its workload.
func (c *cycle) contain(r any) InvariantError {
	inv, ok := r.(InvariantError)
	if !ok {
		inv = InvariantError{What: fmt.Sprint(r)}
	}
	if c.subject != nil {
		if inv.Workload == "" {
			inv.Workload = c.subject.ID
		}
		if inv.Step == "" {
			inv.Step = c.step
		}
	}
	return inv
}
