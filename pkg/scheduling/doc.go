// Package scheduling is Runway's scheduling decision, as a pure function of a
// cluster.State: Cycle takes the state, runs allocate, reclaim, preempt and
// consolidate (SCHEDULING.md §3) tentatively on it, rolls every tentative
// change back, and returns a Plan: bindings (node and devices for every pod), evictions (with
// the rule that fired and the workload they make room for) and, for every
// workload left waiting, its reasons with numbers. Apply then makes a plan
// real on a State, so the simulator and the Scheduler service share one path:
// the service writes the plan to etcd and applies what its watch sees.
//
// The cycle, step by step (each a file):
//
//	fairshare.go  fair share per pool and resource down department → project,
//	              and the decayed usage of time-based fair share (AccrueUsage)
//	order.go      which queue goes next (the six sort rules) and the walk from the root
//	checks.go     allocate's checks: limits and deserved for non-preemptible work
//	allocate.go   the allocate pass, pool by pool in order of preference
//	victims.go    units, groups, and the least-disruptive victim set search
//	reclaim.go    the reclaim gate, per-victim rule and after rule; preempt and its settling rule
//	settle.go     the rounds that repeat the steps until the plan settles, and
//	              the tries that start over when room made is taken again
//	consolidate.go  moving running work inside a pool for a workload no node fits
//	cycle.go      the cycle, the plan, and Apply
//
// Same state in, same plan out: every loop runs in declaration or name order;
// maps are only used for membership.
package scheduling
