package scheduling

import (
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/fairshare"
)

// ComputeFairShares sets every queue's FairShare for every pool and resource:
// the pool's total divided among departments, each department's share among
// its projects (SCHEDULING.md §2).
//
// Where the contract is silent: a department's requestable is the sum of its
// projects' requestables (each already capped by its own limit), capped by the
// department's limit, so a department never claims what its projects could
// not use.
func ComputeFairShares(s *cluster.State) {
	s.RecomputePending()
	for _, p := range s.Pools {
		for r := cluster.Resource(0); r < cluster.NumResources; r++ {
			divideLevel(p.Index, r, p.Total.Get(r), s.Departments, true)
		}
	}
}

func divideLevel(pool int, r cluster.Resource, amount int64, qs []*cluster.Queue, top bool) {
	if len(qs) == 0 {
		return
	}
	in := make([]fairshare.Queue, len(qs))
	for i, q := range qs {
		in[i] = fairshare.Queue{
			Name:     q.Name,
			Order:    q.Order,
			Deserved: q.Quotas[pool].Deserved.Get(r),
			Weight:   q.Quotas[pool].Weight,
			Limit:    q.Quotas[pool].EffectiveLimit(r),
			Request:  requestable(pool, r, q),
		}
	}
	shares := fairshare.Divide(amount, r.Unit(), in)
	for i, q := range qs {
		q.FairShare[pool] = q.FairShare[pool].Set(r, shares[i])
		if top {
			divideLevel(pool, r, shares[i], q.Children, false)
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
