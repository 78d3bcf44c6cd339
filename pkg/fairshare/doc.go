// Package fairshare divides an amount of one resource among sibling queues
// the way the scheduler's fair share does (SCHEDULING.md, section 2): every
// queue first gets what it deserves (capped by what it can request), then
// what is left is offered over quota in proportion to the queues' weights,
// in whole units, and the last units go to the queues that were shortchanged
// most by the rounding.
//
// Divide handles one level of siblings. Walking a queue tree (the pool total
// among departments, each department's share among its projects) is the
// caller's job: call Divide once per level.
//
// Time-based fair share (timebased.go) is the other half of the computation:
// Accrue keeps one decayed usage number per queue and resource, and Adjust
// turns the siblings' usage and weights into the weights Divide's over-quota
// rounds use, w' = w·max(0, 1 + k·(s − u)/s).
//
// Amounts are integer milli-units so that sums and comparisons are exact;
// floating point is used only for the proportional offers and their
// fractions, with a small tolerance.
package fairshare
