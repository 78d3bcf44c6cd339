package scheduling_test

import (
	"fmt"
	"testing"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// BenchmarkConsolidateGang measures a cycle whose pending gang needs the
// pool consolidated: nodes of 8 GPUs each run seven 1-GPU trainings (one
// GPU free per node), and a gang of four 8-GPU pods waits. The cycle opens
// four nodes by moving their 28 trainings onto the others' free GPUs.
func BenchmarkConsolidateGang(b *testing.B) {
	for _, nodes := range []int{100, 1000, 4000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			s := cluster.New()
			for i := range nodes {
				mustNode(b, s, fmt.Sprintf("node-%05d", i), 8)
			}
			project(b, s, "p", "", float64(nodes*8))
			// Binpack would fill nodes whole; the plan places seven per node.
			var running scheduling.Plan
			for i := range nodes * 7 {
				id := fmt.Sprintf("w-%06d", i)
				submit(b, s, id, "p", 1000, cluster.PriorityTrain)
				running.Bindings = append(running.Bindings, scheduling.Binding{Workload: id, Node: fmt.Sprintf("node-%05d", i/7),
					Devices: []int{i % 7}, Share: cluster.FullDevice})
			}
			if err := scheduling.Apply(s, running, 0); err != nil {
				b.Fatal(err)
			}
			if _, err := s.Submit(cluster.WorkloadSpec{ID: "gang", Name: "gang", Project: "p", Type: "training",
				Priority: cluster.PriorityTrain, Pods: 4, MinPods: 4, Pod: cluster.PodRequest{GPU: 8000}}); err != nil {
				b.Fatal(err)
			}
			cfg := scheduling.DefaultConfig()
			var plan scheduling.Plan
			b.ResetTimer()
			for b.Loop() {
				plan = scheduling.Cycle(s, cfg)
			}
			if len(plan.Evictions) != 28 || len(plan.Bindings) != 32 {
				b.Fatalf("moved %d trainings with %d bindings, want 28 moved and 28 + 4 bindings", len(plan.Evictions), len(plan.Bindings))
			}
			b.ReportMetric(float64(len(plan.Evictions)), "moved")
		})
	}
}
