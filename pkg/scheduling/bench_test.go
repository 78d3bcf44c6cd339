package scheduling_test

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// scale describes a benchmark cluster: nodes of 8 GPUs, departments and
// projects with quotas that add up to the cluster, and workloads of which
// about pendingShare are submitted after the rest were placed.
type scale struct {
	nodes, workloads, projects, departments int
	pendingShare                            float64
	// wholeShare is the share of 1-GPU workloads (the rest are 0.25 and
	// 0.125 fractions); it sets how full the cluster gets.
	wholeShare float64
}

// BenchmarkCycle measures one full cycle (fair share, allocate, reclaim,
// preempt) on a busy cluster: most workloads running, about 5% pending.
func BenchmarkCycle(b *testing.B) {
	for _, sc := range []scale{
		{nodes: 1000, workloads: 10_000, projects: 100, departments: 10, pendingShare: 0.05, wholeShare: 0.07},
		{nodes: 4000, workloads: 140_000, projects: 1000, departments: 50, pendingShare: 0.05, wholeShare: 0.07},
		// Oversubscribed: the pending part cannot all fit, so reclaim runs.
		{nodes: 1000, workloads: 35_000, projects: 250, departments: 25, pendingShare: 0.05, wholeShare: 0.10},
		{nodes: 4000, workloads: 140_000, projects: 1000, departments: 50, pendingShare: 0.05, wholeShare: 0.10},
	} {
		name := fmt.Sprintf("nodes=%d/workloads=%d/projects=%d/whole=%.2f", sc.nodes, sc.workloads, sc.projects, sc.wholeShare)
		b.Run(name, func(b *testing.B) {
			s, pending := buildBusy(b, sc)
			cfg := scheduling.DefaultConfig()
			var plan scheduling.Plan
			b.ResetTimer()
			cpu := cpuTime(b)
			for b.Loop() {
				plan = scheduling.Cycle(s, cfg)
			}
			// CPU time (all threads, the collector's too) as well as wall
			// time: on a shared machine it is the steadier of the two.
			b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(pending), "pending")
			b.ReportMetric(float64(len(plan.Bindings)), "bindings")
			b.ReportMetric(float64(len(plan.Evictions)), "evictions")
		})
	}
}

// BenchmarkPlacement places 50,000 pending 1-GPU workloads onto 5,000 empty
// 8-GPU nodes in one cycle and reports placements per second.
func BenchmarkPlacement(b *testing.B) {
	s := cluster.New()
	for i := range 5000 {
		mustNode(b, s, fmt.Sprintf("node-%05d", i), 8)
	}
	for p := range 100 {
		project(b, s, fmt.Sprintf("project-%03d", p), "", 400)
	}
	for i := range 50_000 {
		submit(b, s, fmt.Sprintf("w-%06d", i), fmt.Sprintf("project-%03d", i%100), 1000, cluster.PriorityTrain)
	}
	cfg := scheduling.DefaultConfig()
	var plan scheduling.Plan
	b.ResetTimer()
	cpu := cpuTime(b)
	for b.Loop() {
		plan = scheduling.Cycle(s, cfg)
	}
	b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if len(plan.Bindings) != 40_000 {
		b.Fatalf("placed %d pods, want 40000 (every GPU)", len(plan.Bindings))
	}
	b.ReportMetric(float64(len(plan.Bindings))/(b.Elapsed().Seconds()/float64(b.N)), "placements/s")
}

// buildBusy builds a cluster at the given scale, places the running part
// through the scheduler itself, then submits the pending part.
func buildBusy(b *testing.B, sc scale) (*cluster.State, int) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	s := cluster.New()
	for i := range sc.nodes {
		mustNode(b, s, fmt.Sprintf("node-%05d", i), 8)
	}
	perProject := float64(sc.nodes*8) / float64(sc.projects)
	perDept := sc.projects / sc.departments
	for d := range sc.departments {
		dept := fmt.Sprintf("dept-%02d", d)
		q := cluster.DefaultQuota()
		q.Deserved.GPU = cluster.MilliFromFloat(perProject * float64(perDept))
		if _, err := s.AddDepartment(dept, map[string]cluster.Quota{"default": q}); err != nil {
			b.Fatal(err)
		}
		for p := range perDept {
			project(b, s, fmt.Sprintf("project-%04d", d*perDept+p), dept, perProject)
		}
	}
	running := int(float64(sc.workloads) * (1 - sc.pendingShare))
	for i := range sc.workloads {
		if i == running {
			// Place the running part through the real scheduler, then submit the rest.
			if err := scheduling.Apply(s, scheduling.Cycle(s, scheduling.DefaultConfig()), 0); err != nil {
				b.Fatal(err)
			}
		}
		gpu := int64(125)
		switch r := rng.Float64(); {
		case r < sc.wholeShare:
			gpu = 1000
		case r < sc.wholeShare+0.28:
			gpu = 250
		}
		prio := cluster.PriorityTrain
		if rng.Float64() < 0.1 {
			prio = cluster.PriorityInteractivePreemptible
		}
		submit(b, s, fmt.Sprintf("w-%06d", i), fmt.Sprintf("project-%04d", rng.IntN(sc.projects)), gpu, prio)
	}
	return s, sc.workloads - running
}

// cpuTime is the CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mustNode(b *testing.B, s *cluster.State, name string, gpus int) {
	b.Helper()
	_, err := s.AddNode(cluster.NodeSpec{Name: name, Pool: "default", GPUs: gpus, GPUMemory: 80 << 30, CPU: 128_000, Memory: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
}

func project(b *testing.B, s *cluster.State, name, dept string, gpus float64) {
	b.Helper()
	q := cluster.DefaultQuota()
	q.Deserved.GPU = cluster.MilliFromFloat(gpus)
	if _, err := s.AddProject(name, dept, map[string]cluster.Quota{"default": q}); err != nil {
		b.Fatal(err)
	}
}

func submit(b *testing.B, s *cluster.State, name, project string, gpu int64, prio cluster.Priority) {
	b.Helper()
	_, err := s.Submit(cluster.WorkloadSpec{ID: name, Name: name, Project: project, Type: "training",
		Priority: prio, Pods: 1, MinPods: 1, Pod: cluster.PodRequest{GPU: gpu}})
	if err != nil {
		b.Fatal(err)
	}
}
