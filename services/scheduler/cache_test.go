package scheduler

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// TestCache_RebuildsAfterCompaction: a watch that would resume from a
// compacted revision ends with ErrCompacted; the cache lists again, once,
// and has what was written in between.
func TestCache_RebuildsAfterCompaction(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	m := newMetrics()
	c := newCache(cl.Client, time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)), m, 0)
	var once sync.Once
	c.afterList = func() {
		once.Do(func() {
			node(t, cl.Client, "node-3", 2)
			// One more write, so node-3's revision is below the compaction.
			resp, err := cl.Client.Put(t.Context(), "/test/after", "x")
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := cl.Client.Compact(t.Context(), resp.Header.Revision); err != nil {
				t.Error(err)
			}
		})
	}
	runCache(t, c)
	waitFor(t, 3*time.Second, "node-3 in the model", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.state.Node("node-3") != nil
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lists != 2 {
		t.Errorf("listed %d times, want 2 (one rebuild)", c.lists)
	}
	if n := c.state.Node("node-1"); n == nil || !n.Ready || len(n.Devices) != 2 {
		t.Errorf("node-1 after the rebuild: %+v", n)
	}
}

// TestCache_FollowsMoves: a project moving to another department, a node
// moving to another pool, and deleted pools, departments and projects are
// in the model at once, with the workloads' placements kept.
func TestCache_FollowsMoves(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	put(t, cl.Client, etcdstore.PrefixNodePools+"default", &quotav1.NodePool{Name: "nodepools/default"})
	put(t, cl.Client, etcdstore.PrefixNodePools+"p2", &quotav1.NodePool{Name: "nodepools/p2"})
	put(t, cl.Client, etcdstore.PrefixDepartments+"d2", &quotav1.Department{Name: "departments/d2"})
	r := startReplica(t, cl, "r1")
	training(t, cl.Client, "team-a", "a1", 1, 0)
	waitFor(t, 3*time.Second, "a1 bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-a/a1") })
	model := func(what string, ok func(c *Cache) bool) {
		t.Helper()
		waitFor(t, 3*time.Second, what, func() bool {
			r.cache.mu.Lock()
			defer r.cache.mu.Unlock()
			return ok(r.cache)
		})
	}
	model("a1 placed in the model", func(c *Cache) bool { w := c.state.Workload("team-a/a1"); return w != nil && w.PlacedPods() == 1 })

	p := &quotav1.Project{}
	get(t, cl.Client, etcdstore.PrefixProjects+"team-a", p)
	p.Department = "departments/d2"
	put(t, cl.Client, etcdstore.PrefixProjects+"team-a", p)
	model("team-a under d2, a1 still placed", func(c *Cache) bool {
		q, w := c.state.Queue("team-a"), c.state.Workload("team-a/a1")
		return q != nil && q.Parent != nil && q.Parent.Name == "d2" && w != nil && w.PlacedPods() == 1
	})

	n := &nodemanagerv1.Node{}
	get(t, cl.Client, etcdstore.PrefixNodes+"node-2", n)
	n.NodePool = "nodepools/p2"
	put(t, cl.Client, etcdstore.PrefixNodes+"node-2", n)
	model("node-2 in p2", func(c *Cache) bool { n := c.state.Node("node-2"); return n != nil && n.Pool.Name == "p2" })

	n.NodePool = "nodepools/default"
	put(t, cl.Client, etcdstore.PrefixNodes+"node-2", n)
	if _, err := cl.Client.Delete(t.Context(), etcdstore.PrefixNodePools+"p2"); err != nil {
		t.Fatal(err)
	}
	model("p2 gone", func(c *Cache) bool { return c.state.Pool("p2") == nil && c.state.Node("node-2").Pool.Name == "default" })

	p.Department = "departments/default"
	put(t, cl.Client, etcdstore.PrefixProjects+"team-a", p)
	if _, err := cl.Client.Delete(t.Context(), etcdstore.PrefixDepartments+"d2"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Client.Delete(t.Context(), etcdstore.PrefixProjects+"team-b"); err != nil {
		t.Fatal(err)
	}
	model("d2 and team-b gone", func(c *Cache) bool { return c.state.Queue("d2") == nil && c.state.Queue("team-b") == nil })
	model("a1 still placed on its node", func(c *Cache) bool { w := c.state.Workload("team-a/a1"); return w != nil && w.PlacedPods() == 1 })
	if got := bound(t, cl.Client); !slices.Equal(got, []string{"team-a/a1"}) {
		t.Errorf("bindings %v after the moves, want a1's only", got)
	}
}

// get reads key into msg.
func get(t *testing.T, cli *clientv3.Client, key string, msg proto.Message) {
	t.Helper()
	resp, err := cli.Get(t.Context(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("get %s: %v", key, err)
	}
	if err := proto.Unmarshal(resp.Kvs[0].Value, msg); err != nil {
		t.Fatal(err)
	}
}

// TestCache_PlacementOrderFromRevisions: the model orders a workload's pods
// as they were bound (the victim order's "pod placed last"), from the
// bindings' etcd creation revisions, however the cache reads them: listed
// in key order at start (pod 0 before pod 2 on one node) or watched later.
func TestCache_PlacementOrderFromRevisions(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	put(t, cl.Client, etcdstore.PrefixWorkloads+"team-a/e", &workloadv1.Workload{
		Name: "projects/team-a/workloads/e", Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		CreateTime: timestamppb.New(t0),
		Spec: &workloadv1.WorkloadSpec{Image: "x", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}},
			MilliCpu: 100, MemoryBytes: 100 << 20, Pods: 3, MinPods: 1},
		Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING},
	})
	bind := func(node string, pod, device int) int64 {
		t.Helper()
		b, err := proto.Marshal(&workloadv1.PodStatus{Index: int32(pod), Node: "nodes/" + node,
			DeviceIndexes: []int32{int32(device)}, FractionMilli: 1000, State: workloadv1.PodState_POD_STATE_RUNNING})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cl.Client.Put(t.Context(), etcdstore.PrefixBindings+bindingID(node, "team-a/e", pod), string(b))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	rev2 := bind("node-1", 2, 0)
	rev0 := bind("node-1", 0, 1)

	c := newCache(cl.Client, time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)), newMetrics(), 0)
	runCache(t, c)
	placed := func(n int) func() bool {
		return func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			w := c.state.Workload("team-a/e")
			return w != nil && w.PlacedPods() == n
		}
	}
	waitFor(t, 3*time.Second, "e's two listed pods in the model", placed(2))
	rev1 := bind("node-2", 1, 0)
	waitFor(t, 3*time.Second, "e's watched pod in the model", placed(3))

	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.state.Workload("team-a/e")
	got := []int64{w.Placed[0].Order, w.Placed[1].Order, w.Placed[2].Order}
	if want := []int64{rev0, rev1, rev2}; !slices.Equal(got, want) {
		t.Errorf("placement orders of pods 0, 1, 2: got %v, want their creation revisions %v", got, want)
	}
	if !w.PlacedLater(0, 2) || !w.PlacedLater(1, 0) {
		t.Errorf("bound in the order 2, 0, 1; the model says otherwise: %v", got)
	}
}

// runCache runs the cache until the test ends.
func runCache(t *testing.T, c *Cache) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}
