package scheduling

import (
	"time"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/fairshare"
)

// ComputeFairShares sets every queue's FairShare for every pool and resource:
// the pool's total divided among departments, each department's share among
// its projects (SCHEDULING.md §2). Each resource is divided by its own
// over-quota weights; in a pool with time-based fair share the weights are
// first adjusted by the siblings' decayed usage (fairshare.Adjust), and each
// queue's Adjusted records u, s and w'.
//
// Where the contract is silent: a department's requestable is the sum of its
// projects' requestables (each already capped by its own limit), capped by the
// department's limit, so a department never claims what its projects could
// not use.
func ComputeFairShares(s *cluster.State) {
	s.RecomputePending()
	for _, p := range s.Pools {
		for r := cluster.Resource(0); r < cluster.NumResources; r++ {
			divideLevel(p, r, p.Total.Get(r), s.Departments, true)
		}
	}
}

func divideLevel(p *cluster.Pool, r cluster.Resource, amount int64, qs []*cluster.Queue, top bool) {
	if len(qs) == 0 {
		return
	}
	pool := p.Index
	in := make([]fairshare.Queue, len(qs))
	for i, q := range qs {
		in[i] = fairshare.Queue{
			Name:     q.Name,
			Order:    q.Order,
			Deserved: q.Quotas[pool].Deserved.Get(r),
			Weight:   q.Quotas[pool].Weight.Get(r),
			Limit:    q.Quotas[pool].EffectiveLimit(r),
			Request:  requestable(pool, r, q),
		}
	}
	if p.TimeBased.On() {
		weights, usage := make([]float64, len(qs)), make([]float64, len(qs))
		for i, q := range qs {
			weights[i], usage[i] = in[i].Weight, q.Decayed[pool][r]
		}
		for i, a := range fairshare.Adjust(p.TimeBased.K, weights, usage) {
			qs[i].Adjusted[pool][r] = a
			in[i].Weight = a.Weight
		}
	}
	shares := fairshare.Divide(amount, r.Unit(), in)
	for i, q := range qs {
		q.FairShare[pool] = q.FairShare[pool].Set(r, shares[i])
		if top {
			divideLevel(p, r, shares[i], q.Children, false)
		}
	}
}

// requestable is min(request, limit) of a queue; a department's request is its
// projects' requestables added up.
func requestable(pool int, r cluster.Resource, q *cluster.Queue) int64 {
	var req int64
	if q.Kind == cluster.Project {
		req = q.Usage[pool].Requested().Get(r)
	} else {
		for _, c := range q.Children {
			req += requestable(pool, r, c)
		}
	}
	if l := q.Quotas[pool].EffectiveLimit(r); l != cluster.Unlimited && req > l {
		return l
	}
	return req
}

// AccrueUsage adds dt of what every queue holds now to its decayed usage
// (fairshare.Accrue), in each pool with time-based fair share on; in the
// others it forgets any usage and adjustment, so turning the setting on
// starts from nothing. Callers accrue just before what queues hold changes,
// or at least once a cycle: the simulator as its virtual clock moves, the
// Scheduler service from the allocations it applied.
func AccrueUsage(s *cluster.State, dt time.Duration) {
	for _, p := range s.Pools {
		i := p.Index
		for _, d := range s.Departments {
			accrue(d, p, i, dt)
			for _, q := range d.Children {
				accrue(q, p, i, dt)
			}
		}
	}
}

func accrue(q *cluster.Queue, p *cluster.Pool, i int, dt time.Duration) {
	if !p.TimeBased.On() {
		q.Decayed[i] = cluster.Decayed{}
		q.Adjusted[i] = [cluster.NumResources]fairshare.Adjustment{}
		return
	}
	held := q.Usage[i].Allocated
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		q.Decayed[i][r] = fairshare.Accrue(q.Decayed[i][r], float64(held.Get(r)), dt, p.TimeBased.HalfLife)
	}
}
