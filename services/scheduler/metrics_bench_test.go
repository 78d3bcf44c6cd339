package scheduler

import (
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/history"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// benchServer is a scheduler whose model holds nodes × 8 GPUs, 50
// departments of 20 projects, and workloads 1-GPU workloads: as many
// placed as there are GPUs (each with its binding), the rest pending (for
// capacity). No etcd: the collector reads only the model.
func benchServer(b *testing.B, nodes, workloads int) *Server {
	b.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := newMetrics()
	s := &Server{cfg: Config{Clock: time.Now}, log: log, metrics: m, cache: newCache(nil, time.Now, log, m, 0),
		lastPlan: map[string]decision{}, lastEvents: map[string]decision{}}
	c := s.cache
	st := c.state
	st.AddPool("default")
	for i := range nodes {
		name := fmt.Sprintf("node-%05d", i)
		if _, err := st.AddNode(cluster.NodeSpec{Name: name, Pool: "default", GPUs: 8, GPUMemory: 80 << 30, CPU: 128_000, Memory: 1 << 40}); err != nil {
			b.Fatal(err)
		}
		raw := &nodemanagerv1.Node{Name: "nodes/" + name, Readiness: nodemanagerv1.Readiness_READINESS_READY}
		for d := range 8 {
			raw.Devices = append(raw.Devices, &nodemanagerv1.GpuDevice{Index: int32(d), Healthy: true})
		}
		c.nodes[name] = raw
	}
	for d := range 50 {
		if _, err := st.AddDepartment(fmt.Sprintf("dept-%02d", d), nil); err != nil {
			b.Fatal(err)
		}
		for p := range 20 {
			q := cluster.DefaultQuota()
			q.Deserved.GPU = int64(nodes*8/1000) * 1000
			if _, err := st.AddProject(fmt.Sprintf("project-%02d-%02d", d, p), fmt.Sprintf("dept-%02d", d), map[string]cluster.Quota{"default": q}); err != nil {
				b.Fatal(err)
			}
		}
	}
	placed := 0
	for i := range workloads {
		project := fmt.Sprintf("project-%02d-%02d", i%50, (i/50)%20)
		name := fmt.Sprintf("w-%06d", i)
		id := project + "/" + name
		w, err := st.Submit(cluster.WorkloadSpec{ID: id, Name: name, Project: project, Type: "training",
			Priority: cluster.PriorityTrain, Pods: 1, MinPods: 1, Pod: cluster.PodRequest{GPU: 1000, CPU: 4000, Memory: 16 << 30}})
		if err != nil {
			b.Fatal(err)
		}
		c.workloads[id] = &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING}
		if placed < nodes*8 {
			node := fmt.Sprintf("node-%05d", placed/8)
			st.Place(w, 0, st.Node(node), []int{placed % 8}, 1000)
			placed++
			// Its binding, as the watch records it (BenchmarkPlanWrites).
			c.record(update{kind: kindBinding, id: bindingID(node, id, 0), rev: int64(placed),
				msg: &workloadv1.PodStatus{Node: "nodes/" + node, DeviceIndexes: []int32{int32((placed - 1) % 8)}, FractionMilli: 1000}})
			continue
		}
		s.lastPlan[id] = decision{pending: []scheduling.Reason{{Check: scheduling.CheckCapacity, Pool: "default"}}}
	}
	c.ready = true
	return s
}

// BenchmarkCollection is the cost of one collection of the scheduler's
// series at 5,000 nodes and 100,000 workloads: gathering them (what a
// Prometheus scrape costs the scheduler), and gathering and writing them
// into the embedded TSDB (runway dev's history, one interval), with the
// series count and the write-ahead log's bytes per sample.
func BenchmarkCollection(b *testing.B) {
	s := benchServer(b, 5000, 100_000)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	// What a scrape holds the cache's lock for (the scheduling loop waits).
	b.Run("read-under-lock", func(b *testing.B) {
		for b.Loop() {
			_ = modelCollector{s}.read()
		}
	})
	b.Run("gather", func(b *testing.B) {
		var n int
		for b.Loop() {
			mfs, err := reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			n = 0
			for _, mf := range mfs {
				n += len(mf.GetMetric())
			}
		}
		b.ReportMetric(float64(n), "series")
	})
	b.Run("gather+append", func(b *testing.B) {
		dir := b.TempDir()
		h, err := history.Open(history.Config{Dir: dir, Logger: s.log})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		t0 := time.Now()
		i, samples := 0, 0
		for b.Loop() {
			mfs, err := reg.Gather()
			if err != nil {
				b.Fatal(err)
			}
			n, err := h.Append(b.Context(), t0.Add(time.Duration(i)*history.DefaultInterval), mfs)
			if err != nil {
				b.Fatal(err)
			}
			i, samples = i+1, samples+n
		}
		b.StopTimer()
		var wal int64
		_ = filepath.WalkDir(filepath.Join(dir, "wal"), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if fi, err := d.Info(); err == nil {
					wal += fi.Size()
				}
			}
			return nil
		})
		b.ReportMetric(float64(samples/i), "series")
		b.ReportMetric(float64(wal)/float64(samples), "wal-bytes/sample")
	})
}
