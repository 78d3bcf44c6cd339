package scheduling

import (
	"github.com/runwayhq/runway/pkg/cluster"
)

// maxRounds bounds the rounds of one cycle. The contract's reclaim rules
// allow rare loops (a project within deserved takes a gang from one above
// deserved, the room left over goes to the first project's other work, which
// takes it above its fair share, and the second reclaims); the bound ends
// them, and the next cycle goes on from where this one stopped.
const maxRounds = 8

// settle runs rounds of allocate, reclaim and preempt, then consolidates
// what still waits, and when that moved anything, goes on with rounds on the
// new state: a placement that consolidation made possible may open a
// reclaim or an allocation, which the next cycle would otherwise do.
func (c *cycle) settle() {
	for budget := maxRounds; budget > 0; {
		left, used := c.rounds(budget)
		budget -= used
		moved := false
		for _, j := range left {
			moved = c.consolidate(j) || moved
		}
		if !moved {
			return
		}
	}
}

// rounds runs allocate, reclaim and preempt (SCHEDULING.md §3), then again
// while the plan keeps changing, on what the previous round left, and
// returns the workloads still waiting after the last round, in allocate's
// order, and how many rounds ran (at most most). A second cycle on the state the plan produces would otherwise find
// what the first left undone (a preempted workload that may reclaim, room
// that a later eviction freed, an elastic workload that may grow into it, a
// reclaim blocked by work placed ahead of its turn) and evict again; so
// plans settle within one cycle. Each round explains afresh, keeping only
// the evictions' reasons.
func (c *cycle) rounds(most int) (left []*cluster.Workload, ran int) {
	for round := 0; round < most; round++ {
		ran++
		before := c.changes
		if round > 0 {
			c.reasons = map[*cluster.Workload][]Reason{}
		}
		var still []*cluster.Workload
		for _, j := range c.allocate() {
			if !c.reclaim(j) {
				still = append(still, j)
			}
		}
		left = left[:0]
		for _, j := range still {
			if !c.preempt(j) {
				left = append(left, j)
			}
		}
		if c.changes == before {
			break
		}
	}
	return left, ran
}
