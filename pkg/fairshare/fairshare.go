package fairshare

import (
	"cmp"
	"math"
	"slices"
)

// Unlimited marks a deserved quota or limit with no bound.
const Unlimited int64 = -1

// Queue is one sibling in a division. Amounts are integer milli-units
// (milli-GPU, milli-CPU, bytes...).
type Queue struct {
	Name     string
	Order    int     // creation order; breaks ties in the leftover pass (created first wins), then Name
	Deserved int64   // guaranteed amount; Unlimited counts as the whole amount being divided
	Weight   float64 // over-quota weight; 0 = never offered anything over quota
	Limit    int64   // hard cap; Unlimited = none. (Callers fold overQuota=false into Limit = Deserved.)
	Request  int64   // what the queue holds plus what its pending work asks for
}

// tolerance, in units, for deciding whether an ask fits an offer and for
// flooring offers: float offers such as 0.1+0.2 must still count as 0.3.
const tolerance = 1e-9

// fracScale quantises remembered fractions to nano-units. Comparing integers
// keeps the leftover ordering a strict, transitive order (a tolerance-based
// float comparison would not be) while treating float noise as a tie.
const fracScale = 1e9

// state is the working data for one queue during a division.
type state struct {
	requestable int64
	weight      float64
	frac        int64 // remembered fraction of a unit, in nano-units; 0 = none
}

// Divide splits amount among qs and returns each queue's share, index-aligned
// with qs. unit is the size of one whole unit in milli-units (1000 for GPUs):
// offers are floored to whole units and leftovers go out one unit at a time.
//
// Inputs outside the contract are normalised rather than rejected, so that a
// bad quota cannot stop a scheduling cycle: a negative amount counts as 0, a
// unit <= 0 as 1, a negative request as 0, a negative Deserved or Limit other
// than Unlimited as 0, and a weight that is not a positive finite number as 0.
//
// Divide does not modify qs and its result depends only on the set of queues,
// not on their order in qs (provided names are unique).
func Divide(amount, unit int64, qs []Queue) []int64 {
	shares := make([]int64, len(qs))
	if len(qs) == 0 {
		return shares
	}
	amount = max(amount, 0)
	if unit <= 0 {
		unit = 1
	}

	// 1. Deserved pass. Nothing is scaled down when deserved quotas add up
	// to more than amount; left only needs its sign then, so it is kept at
	// -1 or above, which also rules out overflow.
	st := make([]state, len(qs))
	left := amount
	for i, q := range qs {
		st[i] = state{requestable: requestable(q), weight: positive(q.Weight)}
		d := q.Deserved
		switch {
		case d == Unlimited:
			d = amount
		case d < 0:
			d = 0
		}
		shares[i] = min(d, st[i].requestable)
		left = max(left-shares[i], -1)
	}
	if left <= 0 {
		return shares
	}

	// 2. Over-quota rounds. Only queues with weight can ever be unsatisfied,
	// and a queue's requestable is already capped by its limit, so
	// "requestable > share" also means "below its limit". Sorting once by
	// name and filtering each round keeps a round O(n).
	active := make([]int, 0, len(qs))
	for i := range qs {
		if st[i].weight > 0 && st[i].requestable > shares[i] {
			active = append(active, i)
		}
	}
	slices.SortFunc(active, func(a, b int) int {
		return cmp.Or(cmp.Compare(qs[a].Name, qs[b].Name),
			cmp.Compare(qs[a].Order, qs[b].Order), cmp.Compare(a, b))
	})
	u := float64(unit)
	for len(active) > 0 && left > 0 {
		// Summed in name order so that the float result does not depend on
		// the caller's order.
		var sumW float64
		for _, i := range active {
			sumW += st[i].weight
		}
		l0 := float64(left)
		again := false
		for _, i := range active {
			offer := l0 * (st[i].weight / sumW) // w/sumW <= 1: no overflow
			ask := st[i].requestable - shares[i]
			if float64(ask) <= offer+tolerance*u {
				// Clamping to left only matters when float noise makes
				// the offers add up to slightly more than l0.
				take := min(ask, left)
				shares[i] += take
				left -= take
				if take == ask {
					st[i].frac = 0
					if float64(ask) < offer-tolerance*u {
						again = true // it left part of its offer behind
					}
				}
				continue
			}
			whole := math.Floor(offer/u + tolerance)
			// The ask did not fit, so whole units stay below it; comparing
			// in float first avoids converting an out-of-range float.
			take := min(ask, left)
			if whole*u < float64(take) {
				take = min(int64(whole)*unit, take)
			}
			shares[i] += take
			left -= take
			if f := offer/u - whole; f > tolerance {
				st[i].frac = max(int64(math.Round(f*fracScale)), 1)
			}
		}
		if !again {
			break
		}
		active = slices.DeleteFunc(active, func(i int) bool { return shares[i] >= st[i].requestable })
	}
	if left <= 0 {
		return shares
	}

	// 3. Leftovers: at most one unit per queue, largest remembered fraction
	// first. Where the contract is silent we also cap a grant by what the
	// queue still asks: a fair share above requestable would be a share
	// nobody can use, and would let the sum exceed what the queues want.
	var cands []int
	for i := range qs {
		if st[i].frac > 0 && st[i].requestable > shares[i] {
			cands = append(cands, i)
		}
	}
	slices.SortFunc(cands, func(a, b int) int {
		return cmp.Or(cmp.Compare(st[b].frac, st[a].frac),
			cmp.Compare(qs[a].Order, qs[b].Order),
			cmp.Compare(qs[a].Name, qs[b].Name), cmp.Compare(a, b))
	})
	for _, i := range cands {
		if left <= 0 {
			break
		}
		g := min(unit, left, st[i].requestable-shares[i])
		shares[i] += g
		left -= g
	}
	// Anything still left stays undivided.
	return shares
}

// requestable is min(request, limit), with the normalisation Divide documents.
func requestable(q Queue) int64 {
	r := max(q.Request, 0)
	switch {
	case q.Limit == Unlimited:
		return r
	case q.Limit < 0:
		return 0
	}
	return min(r, q.Limit)
}

// positive treats NaN, infinities and non-positive numbers (weights, usage)
// as 0 so that offers stay finite.
func positive(x float64) float64 {
	if x > 0 && !math.IsInf(x, 1) {
		return x
	}
	return 0
}
