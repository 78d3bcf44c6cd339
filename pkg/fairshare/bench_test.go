package fairshare_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/runwayhq/runway/pkg/fairshare"
)

// randomQueues builds n siblings from r: deserved 0-4 GPUs, mixed weights,
// requests up to 20 GPUs (some fractional), a few limits, so that the
// over-quota rounds and the leftover pass all do work.
func randomQueues(r *rand.Rand, prefix string, n int) []fairshare.Queue {
	qs := make([]fairshare.Queue, n)
	weights := []float64{0, 0.5, 1, 1, 2, 3}
	for i := range qs {
		limit := fairshare.Unlimited
		if r.IntN(10) == 0 {
			limit = int64(r.IntN(10)+1) * G
		}
		qs[i] = fairshare.Queue{
			Name:     fmt.Sprintf("%s-%05d", prefix, i),
			Order:    i,
			Deserved: int64(r.IntN(5)) * G,
			Weight:   weights[r.IntN(len(weights))],
			Limit:    limit,
			Request:  int64(r.IntN(20*G + 1)),
		}
	}
	r.Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })
	return qs
}

// total is what the queues' deserved quotas add up to plus half of what
// they ask beyond: enough that there is something to divide over quota.
func total(qs []fairshare.Queue) int64 {
	var d, r int64
	for _, x := range qs {
		d += x.Deserved
		r += x.Request
	}
	return d + max(r-d, 0)/2
}

func BenchmarkDivide(b *testing.B) {
	qs := randomQueues(rand.New(rand.NewPCG(1, 2)), "project", 10_000)
	amount := total(qs)
	b.ReportAllocs()
	for b.Loop() {
		fairshare.Divide(amount, G, qs)
	}
}

// BenchmarkDivideTree divides a pool among 50 departments, then each
// department's share among its 200 projects; time-based=on first adjusts
// every level's weights by usage (Adjust), as a pool with time-based fair
// share does.
func BenchmarkDivideTree(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	const departments, projects = 50, 200
	depts := make([]fairshare.Queue, departments)
	children := make([][]fairshare.Queue, departments)
	for d := range depts {
		children[d] = randomQueues(r, fmt.Sprintf("dept-%02d-project", d), projects)
		var req int64
		for _, p := range children[d] {
			req += p.Request // a department asks what its projects ask
		}
		depts[d] = fairshare.Queue{
			Name:     fmt.Sprintf("dept-%02d", d),
			Order:    d,
			Deserved: int64(r.IntN(400)) * G,
			Weight:   float64(r.IntN(3) + 1),
			Limit:    fairshare.Unlimited,
			Request:  req,
		}
	}
	var all []fairshare.Queue
	for _, c := range children {
		all = append(all, c...)
	}
	amount := total(all)
	// Past usage: anything up to a day of 20 GPUs, in milli-GPU-seconds.
	usage := func(qs []fairshare.Queue) []float64 {
		u := make([]float64, len(qs))
		for i := range u {
			u[i] = r.Float64() * 20 * G * 86400
		}
		return u
	}
	deptUsage, childUsage := usage(depts), make([][]float64, departments)
	for d, c := range children {
		childUsage[d] = usage(c)
	}
	divide := func(amount int64, qs []fairshare.Queue, u []float64, timeBased bool) []int64 {
		if !timeBased {
			return fairshare.Divide(amount, G, qs)
		}
		weights := make([]float64, len(qs))
		for i, q := range qs {
			weights[i] = q.Weight
		}
		in := append([]fairshare.Queue(nil), qs...)
		for i, a := range fairshare.Adjust(0.5, weights, u) {
			in[i].Weight = a.Weight
		}
		return fairshare.Divide(amount, G, in)
	}
	for _, timeBased := range []bool{false, true} {
		name := "time-based=off"
		if timeBased {
			name = "time-based=on"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				shares := divide(amount, depts, deptUsage, timeBased)
				for d, c := range children {
					divide(shares[d], c, childUsage[d], timeBased)
				}
			}
		})
	}
}
