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
		if c.retaken.w != nil {
			return // the cycle starts over
		}
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
			if c.retaken.w != nil {
				return nil, ran
			}
		}
		left = left[:0]
		for _, j := range still {
			if !c.preempt(j) {
				left = append(left, j)
			}
			if c.retaken.w != nil {
				return nil, ran
			}
		}
		if c.changes == before {
			break
		}
	}
	return left, ran
}

// Room taken again. A workload J placed by evictions or moves is protected
// by nothing for the rest of the cycle: a later search may take its room (a
// higher-priority workload of J's project preempting it, another project
// reclaiming it), as the next cycle would, J's running then. J's victims
// would then have been evicted for nothing, and a plan evicts only for work
// it places; so the cycle starts over and makes every decision as before but
// that one: J waits, and what took its room searches again on the state
// without it. The tries replay one another up to the decision vetoed, so a
// decision is named by its workload and its number among the sets found for
// that workload in the try. After maxTries, the last try keeps such work out
// of the searches instead (the next cycle then goes on from where it
// stopped).
const maxTries = 5

// decision names the n-th set of victims or moves found for w in a try.
type decision struct {
	w *cluster.Workload
	n int
}

// vetoed counts a set found for j and reports whether an earlier try
// vetoed that decision; then j waits with reason why.
func (c *cycle) vetoed(j *cluster.Workload, p *cluster.Pool, why Check) bool {
	c.decided[j]++
	if !c.vetoes[decision{j, c.decided[j]}] {
		return false
	}
	if why != 0 {
		// The work that takes its room may be another tenant's: not named.
		c.because(j, p, Reason{Check: why, Text: "the room its victims would free would be taken again in this cycle " +
			"by other pending work (of higher priority in its project, or reclaimed by another project); nothing is evicted for it"})
	}
	return true
}

// made records that evictions or moves made room for j.
func (c *cycle) made(j *cluster.Workload) { c.placedFor[j] = c.decided[j] }

// retakes reports whether set takes a unit of a workload that this try's
// evictions or moves made room for, and records that decision.
func (c *cycle) retakes(units []unit, set []int) bool {
	for _, i := range set {
		if w := units[i].w; c.placedFor[w] > 0 {
			c.retaken = decision{w, c.placedFor[w]}
			return true
		}
	}
	return false
}
