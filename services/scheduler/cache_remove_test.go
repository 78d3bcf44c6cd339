package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// TestCache_DeletionsInPlace: deleting nodes, pools, departments and
// projects, and moving a node and a project, changes the model in place
// (the same State, never a new one), and after each step the model is the
// one a cache listing the store from scratch builds.
func TestCache_DeletionsInPlace(t *testing.T) {
	cl := etcdtest.New(t)
	cli := cl.Client
	put(t, cli, etcdstore.PrefixNodePools+"a100", &quotav1.NodePool{Name: "nodepools/a100"})
	put(t, cli, etcdstore.PrefixDepartments+"research", &quotav1.Department{Name: "departments/research",
		CreateTime: timestamppb.New(t0)})
	project(t, cli, "team-a", 2)
	for _, id := range []string{"team-b", "team-c"} {
		d := int64(1000)
		put(t, cli, etcdstore.PrefixProjects+id, &quotav1.Project{Name: "projects/" + id, Department: "departments/research",
			CreateTime:     timestamppb.New(t0),
			NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/a100", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &d}}}})
	}
	node(t, cli, "node-1", 2)
	node(t, cli, "node-2", 2)
	node(t, cli, "node-4", 2)
	inPool(t, cli, "node-3", "a100")
	training(t, cli, "team-a", "a1", 1, 0)
	training(t, cli, "team-a", "a2", 1, 1)
	training(t, cli, "team-b", "b1", 1, 2)
	training(t, cli, "team-c", "c1", 1, 3)
	w := &workloadv1.Workload{}
	get(t, cli, etcdstore.PrefixWorkloads+"team-c/c1", w)
	w.Spec.NodePools = []string{"nodepools/a100"}
	put(t, cli, etcdstore.PrefixWorkloads+"team-c/c1", w)
	bindPod(t, cli, "node-1", "team-a/a1", 0, 0)
	bindPod(t, cli, "node-4", "team-a/a2", 0, 1)
	bindPod(t, cli, "node-2", "team-b/b1", 0, 0)
	bindPod(t, cli, "node-3", "team-c/c1", 0, 0)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := newCache(cli, time.Now, log, newMetrics(), 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var st *cluster.State
	same := func(step string) {
		t.Helper()
		var live, fresh string
		deadline := time.Now().Add(5 * time.Second)
		for {
			c.mu.Lock()
			if c.ready {
				live = describe(c.state)
				if st == nil {
					st = c.state
				} else if c.state != st {
					c.mu.Unlock()
					t.Fatalf("%s: the model was built anew, want it changed in place", step)
				}
			}
			c.mu.Unlock()
			fresh = fromScratch(t, cli, log)
			if live == fresh || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if live != fresh {
			t.Fatalf("%s: the model differs from one built from scratch:\nin place:\n%s\nfrom scratch:\n%s", step, live, fresh)
		}
	}
	same("start")
	if !strings.Contains(describe(st), "team-b/b1 Running on node-2") {
		t.Fatalf("b1 not placed at the start:\n%s", describe(st))
	}
	del := func(key string) {
		t.Helper()
		if _, err := cli.Delete(t.Context(), key); err != nil {
			t.Fatal(err)
		}
	}
	del(etcdstore.PrefixNodes + "node-2")
	same("node-2 deleted (b1 loses its pod)")
	inPool(t, cli, "node-4", "a100")
	same("node-4 moved to a100 (a2's pod stays)")
	p := &quotav1.Project{}
	get(t, cli, etcdstore.PrefixProjects+"team-c", p)
	p.Department = "departments/default"
	put(t, cli, etcdstore.PrefixProjects+"team-c", p)
	same("team-c moved to the default department")
	del(etcdstore.PrefixDepartments + "research")
	same("research deleted (team-b and b1 wait for it)")
	del(etcdstore.PrefixNodePools + "a100")
	same("a100 deleted (node-3, node-4 and c1 wait for it)")
	del(etcdstore.PrefixProjects + "team-a")
	same("team-a deleted")
	put(t, cli, etcdstore.PrefixDepartments+"research", &quotav1.Department{Name: "departments/research", CreateTime: timestamppb.New(t0)})
	put(t, cli, etcdstore.PrefixNodePools+"a100", &quotav1.NodePool{Name: "nodepools/a100"})
	project(t, cli, "team-a", 2)
	same("research, a100 and team-a back")
	if d := describe(st); !strings.Contains(d, "team-c/c1 Running on node-3") || !strings.Contains(d, "team-a/a2 Running on node-4") {
		t.Errorf("c1 and a2 not placed again from their bindings:\n%s", d)
	}
}

// inPool writes node id with 2 GPUs in pool.
func inPool(t *testing.T, cli *clientv3.Client, id, pool string) {
	t.Helper()
	node(t, cli, id, 2)
	n := &nodemanagerv1.Node{}
	get(t, cli, etcdstore.PrefixNodes+id, n)
	n.NodePool = "nodepools/" + pool
	put(t, cli, etcdstore.PrefixNodes+id, n)
}

// bindPod writes a binding of pod of workload wid on node, on device dev.
func bindPod(t *testing.T, cli *clientv3.Client, node, wid string, pod, dev int) {
	t.Helper()
	put(t, cli, etcdstore.PrefixBindings+bindingID(node, wid, pod), &workloadv1.PodStatus{Index: int32(pod), Node: "nodes/" + node,
		FractionMilli: 1000, DeviceIndexes: []int32{int32(dev)}, State: workloadv1.PodState_POD_STATE_BOUND})
}

// fromScratch is the model a cache builds from one list of the store, as
// at a start.
func fromScratch(t *testing.T, cli *clientv3.Client, log *slog.Logger) string {
	t.Helper()
	c := newCache(cli, time.Now, log, newMetrics(), 0)
	lists, err := c.list(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range lists.updates {
		c.record(u)
	}
	c.sync()
	return describe(c.state)
}

// describe is what a model says about the cluster, in a stable order:
// pools and their nodes with what they hold, the queue tree with quotas
// and usage per pool, and each workload's phase and placements. Creation
// counters (queue Order, workload Seq) and clocks are left out: a model
// built at another time numbers and stamps them otherwise.
func describe(st *cluster.State) string {
	var b strings.Builder
	for _, p := range st.Pools {
		fmt.Fprintf(&b, "pool %s #%d %+v total %v used %v min %d unhealthy %d ready %d\n", p.Name, p.Index, p.TimeBased,
			p.Total, p.Used, p.MinDeviceMemory, p.Unhealthy, p.ReadyNodes())
		for _, n := range p.Nodes {
			var pods []string
			for _, ref := range n.Pods {
				pods = append(pods, fmt.Sprintf("%s/%d", ref.Workload.ID, ref.Pod))
			}
			sort.Strings(pods)
			fmt.Fprintf(&b, "  node %s ready %v cordoned %v capacity %v used %v devices %+v pods %v\n", n.Name, n.Ready, n.Cordoned,
				n.Capacity, n.Used, n.Devices, pods)
		}
	}
	queue := func(q *cluster.Queue, indent string) {
		fmt.Fprintf(&b, "%s%s %s", indent, q.Kind, q.Name)
		for _, p := range st.Pools {
			fmt.Fprintf(&b, " [%s %+v %+v]", p.Name, q.Quotas[p.Index], q.Usage[p.Index])
		}
		b.WriteString("\n")
	}
	// Sibling queues by name: a queue that comes back is added after its
	// siblings, as a new one is, where a model built from scratch orders
	// them by their stored creation times.
	byName := func(qs []*cluster.Queue) []*cluster.Queue {
		qs = slices.Clone(qs)
		slices.SortFunc(qs, func(a, b *cluster.Queue) int { return strings.Compare(a.Name, b.Name) })
		return qs
	}
	for _, d := range byName(st.Departments) {
		queue(d, "")
		for _, p := range byName(d.Children) {
			queue(p, "  ")
		}
	}
	ws := st.Workloads()
	sort.Slice(ws, func(i, j int) bool { return ws[i].ID < ws[j].ID })
	for _, w := range ws {
		fmt.Fprintf(&b, "%s %v", w.ID, w.Phase)
		for i, at := range w.Placed {
			if at.Node != nil {
				fmt.Fprintf(&b, " on %s (pod %d, devices %v)", at.Node.Name, i, at.Devices)
			}
		}
		fmt.Fprintf(&b, " of %s in %v\n", w.Project.Name, w.Pools)
	}
	return b.String()
}

// BenchmarkCache_DeleteNode: one node of a 1000-node, 4000-workload model
// deleted and registered again, as the cache's watch applies it (under its
// lock): in place, the cost is the node and its pods, not the cluster.
func BenchmarkCache_DeleteNode(b *testing.B) {
	const nodes, workloads = 1000, 4000
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := newCache(nil, time.Now, log, newMetrics(), 0)
	rev := int64(0)
	apply := func(u update) {
		rev++
		u.rev = rev
		c.record(u)
	}
	d := int64(workloads * 1000)
	apply(update{kind: kindProject, id: "team-a", msg: &quotav1.Project{Name: "projects/team-a", Department: "departments/default",
		NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &d}}}}})
	nodeMsg := func(i int) *nodemanagerv1.Node {
		n := &nodemanagerv1.Node{Name: fmt.Sprintf("nodes/node-%04d", i), NodePool: "nodepools/default",
			Readiness: nodemanagerv1.Readiness_READINESS_READY,
			Capacity:  &commonv1.ResourceQuantity{MilliGpus: 8000, MilliCpu: 64000, MemoryBytes: 512 << 30}}
		for g := range 8 {
			n.Devices = append(n.Devices, &nodemanagerv1.GpuDevice{Index: int32(g), MemoryBytes: 80 << 30, Healthy: true})
		}
		return n
	}
	for i := range nodes {
		apply(update{kind: kindNode, id: fmt.Sprintf("node-%04d", i), msg: nodeMsg(i)})
	}
	for i := range workloads {
		id := fmt.Sprintf("w-%05d", i)
		apply(update{kind: kindWorkload, id: "team-a/" + id, msg: &workloadv1.Workload{Name: "projects/team-a/workloads/" + id,
			Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, CreateTime: timestamppb.New(t0),
			Spec: &workloadv1.WorkloadSpec{Image: "x", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}},
				MilliCpu: 100, MemoryBytes: 100 << 20},
			Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING}}})
		node := fmt.Sprintf("node-%04d", i%nodes)
		apply(update{kind: kindBinding, id: bindingID(node, "team-a/"+id, 0), msg: &workloadv1.PodStatus{Node: "nodes/" + node,
			FractionMilli: 1000, DeviceIndexes: []int32{int32(i / nodes)}}})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sync()
	if n := len(c.state.Node("node-0000").Pods); n != workloads/nodes {
		b.Fatalf("node-0000 holds %d pods, want %d", n, workloads/nodes)
	}
	for b.Loop() {
		apply(update{kind: kindNode, id: "node-0000", removed: true})
		c.sync()
		apply(update{kind: kindNode, id: "node-0000", msg: nodeMsg(0)})
		c.sync()
	}
	if n := len(c.state.Node("node-0000").Pods); n != workloads/nodes {
		b.Fatalf("after the loop node-0000 holds %d pods, want %d", n, workloads/nodes)
	}
}
