package scheduling_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/fairshare"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// BenchmarkComputeFairShares measures the fair-share step of a cycle on a
// busy cluster, with time-based fair share off and on (usage accrued for an
// hour, so every queue has some), and AccrueUsage, which the simulator and
// the service run before each cycle when it is on.
func BenchmarkComputeFairShares(b *testing.B) {
	for _, sc := range []scale{
		{nodes: 1000, workloads: 35_000, projects: 250, departments: 25, pendingShare: 0.05, wholeShare: 0.10},
		{nodes: 4000, workloads: 140_000, projects: 1000, departments: 50, pendingShare: 0.05, wholeShare: 0.10},
	} {
		s, _ := buildBusy(b, sc)
		size := fmt.Sprintf("nodes=%d/projects=%d", sc.nodes, sc.projects)
		b.Run(size+"/time-based=off", func(b *testing.B) {
			for b.Loop() {
				scheduling.ComputeFairShares(s)
			}
		})
		// k = 0 does all the bookkeeping but leaves the weights, hence the
		// division's work, as they are: its difference to off is the cost
		// of the adjustment itself; k = 1 adds what other weights change in
		// the over-quota rounds.
		scheduling.AccrueUsage(s, time.Hour)
		for _, k := range []float64{0, 1} {
			s.Pool("default").TimeBased = fairshare.TimeBased{HalfLife: time.Hour, K: k}
			if k == 0 {
				scheduling.AccrueUsage(s, time.Hour)
			}
			b.Run(fmt.Sprintf("%s/time-based=on/k=%g", size, k), func(b *testing.B) {
				for b.Loop() {
					scheduling.ComputeFairShares(s)
				}
			})
		}
		b.Run(size+"/accrue", func(b *testing.B) {
			for b.Loop() {
				scheduling.AccrueUsage(s, time.Second)
			}
		})
	}
}
