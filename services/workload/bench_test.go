package workload_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"go.etcd.io/etcd/server/v3/embed"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// BenchmarkCreateWorkload: CreateWorkload through the generated client,
// one call at a time (gRPC → validation → project check, one etcd read →
// create-if-absent Txn), on an embedded etcd without fsync (the tests'
// speed-up) and with it (etcd's default, the dev mode's).
func BenchmarkCreateWorkload(b *testing.B) {
	for _, fsync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%v", fsync), func(b *testing.B) {
			e := start(b, etcdtest.WithConfig(func(cfg *embed.Config) { cfg.UnsafeNoFsync = !fsync }))
			e.addProjects(b, "team-a")
			ctx := context.Background()
			w := training()
			n := 0
			for b.Loop() {
				if _, err := e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{
					Parent: "projects/team-a", WorkloadId: fmt.Sprintf("w%07d", n), Workload: w}); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "creates/s")
		})
	}
}

// BenchmarkCreateWorkloadParallel: the same with GOMAXPROCS×8 callers at once
// (etcd batches concurrent proposals into one raft entry and fsync), for
// comparison with the serial number.
func BenchmarkCreateWorkloadParallel(b *testing.B) {
	e := start(b)
	e.addProjects(b, "team-a")
	w := training()
	var n atomic.Int64
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := n.Add(1)
			if _, err := e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{
				Parent: "projects/team-a", WorkloadId: fmt.Sprintf("w%07d", i), Workload: w}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(n.Load())/b.Elapsed().Seconds(), "creates/s")
}
