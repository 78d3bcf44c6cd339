package etcdstore_test

import (
	"fmt"
	"testing"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"go.etcd.io/etcd/server/v3/embed"
)

// benchModes: the test speed-up (no fsync) and etcd's durable default, so
// the notes can quote both; the dev mode runs with fsync on.
var benchModes = []struct {
	name  string
	fsync bool
}{{"fsync=off", false}, {"fsync=on", true}}

func benchCluster(b *testing.B, fsync bool) *etcdtest.Cluster {
	return etcdtest.New(b, etcdtest.WithConfig(func(cfg *embed.Config) { cfg.UnsafeNoFsync = !fsync }))
}

func benchProject(i int) *quotav1.Project {
	return &quotav1.Project{Name: fmt.Sprintf("projects/p%09d", i), Description: "benchmark project", Department: "departments/default"}
}

// BenchmarkCreate: one create-if-absent Txn per write, one at a time (the
// round-trip-bound baseline).
func BenchmarkCreate(b *testing.B) {
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			cl := benchCluster(b, m.fsync)
			c := etcdstore.NewCollection(cl.Client, etcdstore.PrefixProjects, newProject)
			ctx := b.Context()
			n := 0
			for b.Loop() {
				if _, err := c.Create(ctx, fmt.Sprintf("p%09d", n), benchProject(n)); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}

// BenchmarkBatchCreate: 100 create-if-absent writes per Txn, one Txn at a
// time.
func BenchmarkBatchCreate(b *testing.B) {
	const perTxn = 100
	for _, m := range benchModes {
		b.Run(m.name, func(b *testing.B) {
			cl := benchCluster(b, m.fsync)
			c := etcdstore.NewCollection(cl.Client, etcdstore.PrefixProjects, newProject)
			ctx := b.Context()
			n := 0
			for b.Loop() {
				batch := etcdstore.NewBatch(cl.Client)
				for range perTxn {
					batch.PutIf(c.Key(fmt.Sprintf("p%09d", n)), benchProject(n), 0)
					n++
				}
				if _, err := batch.Commit(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}
