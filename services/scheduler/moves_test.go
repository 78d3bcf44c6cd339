package scheduler

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// bind writes pod 0 of workload wid bound to node on devices, with its pod
// key, as a plan of the scheduler does.
func bind(t testing.TB, cli *clientv3.Client, wid, node string, devices ...int32) {
	t.Helper()
	put(t, cli, etcdstore.PrefixBindings+bindingID(node, wid, 0), &workloadv1.PodStatus{Node: "nodes/" + node,
		DeviceIndexes: devices, FractionMilli: 1000, State: workloadv1.PodState_POD_STATE_BOUND})
	put(t, cli, podKeyOf(wid, 0), &workloadv1.PodStatus{Node: "nodes/" + node})
}

// fragmented writes 4 nodes of 2 GPUs and team-a's a and b (1 GPU each)
// on node-1 and node-2 and c (2 GPUs) on node-3: 4 GPUs free, no node
// with 2 but node-4. team-a and team-b deserve 4 GPUs each, so nothing
// is reclaimed.
func fragmented(t testing.TB, cl *etcdtest.Cluster) {
	t.Helper()
	for i := 1; i <= 4; i++ {
		node(t, cl.Client, fmt.Sprintf("node-%d", i), 2)
	}
	project(t, cl.Client, "team-a", 4)
	project(t, cl.Client, "team-b", 4)
	training(t, cl.Client, "team-a", "a", 1, 0)
	training(t, cl.Client, "team-a", "b", 1, 1)
	training(t, cl.Client, "team-a", "c", 2, 2)
	bind(t, cl.Client, "team-a/a", "node-1", 0)
	bind(t, cl.Client, "team-a/b", "node-2", 0)
	bind(t, cl.Client, "team-a/c", "node-3", 0, 1)
}

// gang writes a PENDING training of pods pods of gpus GPUs each, all of
// them its minimum.
func gang(t testing.TB, cli *clientv3.Client, proj, id string, pods, gpus int32, seq int) {
	t.Helper()
	put(t, cli, etcdstore.PrefixWorkloads+proj+"/"+id, &workloadv1.Workload{
		Name: "projects/" + proj + "/workloads/" + id, Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		CreateTime: timestamppb.New(t0.Add(time.Duration(seq) * time.Second)),
		Spec: &workloadv1.WorkloadSpec{Image: "x", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: gpus}},
			Pods: pods, MinPods: pods, MilliCpu: 100, MemoryBytes: 100 << 20},
		Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING},
	})
}

// TestConsolidation_OneTransaction: a gang of two 2-GPU pods of team-b
// waits on a fragmented pool; one plan moves one of team-a's 1-GPU
// trainings and binds the gang, in one fenced transaction: the moved
// pod's old binding deleted, its new one and its pod key written, its
// event, and the gang's bindings and pod keys. The event says where it
// went and for which project, never the other tenant's workload; the
// 2-GPU training is not touched.
func TestConsolidation_OneTransaction(t *testing.T) {
	cl := etcdtest.New(t)
	fragmented(t, cl)
	r := startReplica(t, cl, "r1")
	waitFor(t, 5*time.Second, "a leader", r.leading)
	waitFor(t, 3*time.Second, "a, b and c in the model", func() bool {
		r.cache.mu.Lock()
		defer r.cache.mu.Unlock()
		return len(r.cache.byPod) == 3
	})
	before, err := cl.Client.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	start := before.Header.Revision
	gang(t, cl.Client, "team-b", "j", 2, 2, 3)
	waitFor(t, 5*time.Second, "j bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-b/j") })

	// Every write from the gang's submission on, by revision.
	resp, err := cl.Client.Get(t.Context(), etcdstore.Root, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	w := cl.Client.Watch(t.Context(), etcdstore.Root, clientv3.WithPrefix(), clientv3.WithRev(start+1))
	byRev := map[int64][]string{}
	for got := false; !got; {
		wr := <-w
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			k := strings.TrimPrefix(string(ev.Kv.Key), etcdstore.Root)
			if strings.HasPrefix(k, "reasons/") || strings.HasPrefix(k, "election/") || strings.HasPrefix(k, "workloads/") {
				continue
			}
			if strings.HasPrefix(k, "evictions/") {
				k = k[:strings.LastIndex(k, "/")+1] + "…"
			}
			byRev[ev.Kv.ModRevision] = append(byRev[ev.Kv.ModRevision], ev.Type.String()+" "+k)
			got = got || ev.Kv.ModRevision >= resp.Header.Revision
		}
		got = got || wr.Header.Revision >= resp.Header.Revision
	}
	if len(byRev) != 1 {
		t.Fatalf("the move and the gang written in %d transactions, want one: %v", len(byRev), byRev)
	}
	var ops []string
	for _, o := range byRev {
		ops = o
	}
	slices.Sort(ops)
	// b, the newest, moves to node-1 beside a; the gang takes node-2 and node-4.
	want := []string{
		"DELETE bindings/node-2/team-a.b.0",
		"PUT bindings/node-1/team-a.b.0",
		"PUT bindings/node-2/team-b.j.0", "PUT bindings/node-4/team-b.j.1",
		"PUT evictions/team-a/b/…",
		"PUT pods/team-a/b/0",
		"PUT pods/team-b/j/0", "PUT pods/team-b/j/1",
	}
	slices.Sort(want)
	alt := slices.Clone(want) // the gang's pods the other way round
	for i, o := range alt {
		alt[i] = strings.NewReplacer("node-2/team-b.j.0", "node-2/team-b.j.1", "node-4/team-b.j.1", "node-4/team-b.j.0").Replace(o)
	}
	slices.Sort(alt)
	if !slices.Equal(ops, want) && !slices.Equal(ops, alt) {
		t.Fatalf("the plan's transaction wrote\n%s\nwant\n%s", strings.Join(ops, "\n"), strings.Join(want, "\n"))
	}

	evs := evictions(t, cl.Client, "team-a/b")
	if len(evs) != 1 {
		t.Fatalf("b's events %v, want one", evs)
	}
	ev := evs[0]
	const msg = "Moved from node-2 to node-1 in node pool default to make room for a workload of project team-b, "
	if ev.GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_CONSOLIDATION || ev.GetPods() != 1 ||
		!slices.Equal(ev.GetNodes(), []string{"nodes/node-2"}) || !strings.HasPrefix(ev.GetMessage(), msg) {
		t.Errorf("b's event %v, want a consolidation of 1 pod from node-2 saying %q", ev, msg)
	}
	// b is team-a's: nothing in its history names team-b's workload.
	if ev.GetBy() != "projects/team-b" || strings.Contains(ev.GetMessage(), "j ") || strings.Contains(ev.GetMessage(), "workloads/") {
		t.Errorf("b's event names another tenant's workload: by %q, %q", ev.GetBy(), ev.GetMessage())
	}
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); strings.HasPrefix(k, etcdstore.PrefixBindings) && kv.ModRevision <= start &&
			!slices.Contains([]string{"node-1/team-a.a.0", "node-3/team-a.c.0"}, strings.TrimPrefix(k, etcdstore.PrefixBindings)) {
			t.Errorf("binding %s left from before the plan, want only a's and c's", k)
		}
	}
	if len(evictions(t, cl.Client, "team-a/a")) != 0 || len(evictions(t, cl.Client, "team-a/c")) != 0 {
		t.Error("a or c has an eviction event; only b moves")
	}
	waitFor(t, 3*time.Second, "b on node-1 in the model", func() bool {
		r.cache.mu.Lock()
		defer r.cache.mu.Unlock()
		wb := r.cache.state.Workload("team-a/b")
		return wb.PlacedPods() == 1 && wb.Placed[0].Node.Name == "node-1"
	})
	// As the library has it (Apply): a move is not a preemption, and the
	// model never saw b without its pod.
	r.cache.mu.Lock()
	wb := r.cache.state.Workload("team-a/b")
	phase, preempted := wb.Phase, wb.Preemptions
	r.cache.mu.Unlock()
	if phase != cluster.Running || preempted != 0 {
		t.Errorf("b in the model: %v with %d preemptions, want Running with none", phase, preempted)
	}
}

// TestConsolidation_onItsNode: half GPUs u and w share nothing on a node
// of 2 GPUs (one on each device), so a 1-GPU training of team-b waits with
// a whole GPU free in total. The move puts one of them beside the other:
// same node, same binding key, another device. The binding is rewritten
// in place in the gang's transaction, fenced on its revision (a key
// cannot be deleted and created in one transaction), its pod key is left
// as it is (same node), and the model holds the pod on its new device,
// ordered as placed by the move.
func TestConsolidation_onItsNode(t *testing.T) {
	cl := etcdtest.New(t)
	node(t, cl.Client, "node-1", 2)
	project(t, cl.Client, "team-a", 1)
	project(t, cl.Client, "team-b", 1)
	half := func(id string, seq int, device int32) {
		put(t, cl.Client, etcdstore.PrefixWorkloads+"team-a/"+id, &workloadv1.Workload{
			Name: "projects/team-a/workloads/" + id, Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			CreateTime: timestamppb.New(t0.Add(time.Duration(seq) * time.Second)),
			Spec: &workloadv1.WorkloadSpec{Image: "x", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}},
				MilliCpu: 100, MemoryBytes: 100 << 20},
			Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING},
		})
		put(t, cl.Client, etcdstore.PrefixBindings+bindingID("node-1", "team-a/"+id, 0), &workloadv1.PodStatus{Node: "nodes/node-1",
			DeviceIndexes: []int32{device}, FractionMilli: 500, State: workloadv1.PodState_POD_STATE_BOUND})
		put(t, cl.Client, podKeyOf("team-a/"+id, 0), &workloadv1.PodStatus{Node: "nodes/node-1"})
	}
	half("u", 0, 0)
	half("w", 1, 1)
	r := startReplica(t, cl, "r1")
	waitFor(t, 5*time.Second, "a leader", r.leading)
	waitFor(t, 3*time.Second, "u and w in the model", func() bool {
		r.cache.mu.Lock()
		defer r.cache.mu.Unlock()
		return len(r.cache.byPod) == 2
	})
	before, err := cl.Client.Get(t.Context(), etcdstore.Root, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	kvs := map[string]int64{}
	for _, kv := range before.Kvs {
		kvs[string(kv.Key)] = kv.ModRevision
	}
	training(t, cl.Client, "team-b", "j", 1, 2)
	waitFor(t, 5*time.Second, "j bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-b/j") })

	after, err := cl.Client.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var moved string
	revs := map[int64]bool{}
	for _, kv := range after.Kvs {
		k := string(kv.Key)
		if kvs[k] == kv.ModRevision {
			continue // untouched
		}
		revs[kv.ModRevision] = true
		if !strings.Contains(k, "team-b.j") {
			if moved != "" || kv.CreateRevision != kvs[k] { // written once before: its ModRevision was its CreateRevision
				t.Fatalf("bindings %v: more than one moved, or one deleted and created again", after.Kvs)
			}
			moved = strings.TrimPrefix(k, etcdstore.PrefixBindings)
		}
	}
	if moved == "" || len(revs) != 1 {
		t.Fatalf("bindings %v: want one of u and w rewritten in j's transaction", after.Kvs)
	}
	b, _ := parseBinding(moved, &workloadv1.PodStatus{})
	if pk := podKeyOf(b.Workload, 0); func() int64 {
		resp, err := cl.Client.Get(t.Context(), pk)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s: %v, %v", pk, resp, err)
		}
		return resp.Kvs[0].ModRevision
	}() != kvs[pk] {
		t.Errorf("%s rewritten: a move on its node keeps its pod key", pk)
	}
	var rev int64
	for r := range revs {
		rev = r
	}
	waitFor(t, 3*time.Second, b.Workload+" beside the other in the model, placed at the move", func() bool {
		r.cache.mu.Lock()
		defer r.cache.mu.Unlock()
		u, w := r.cache.state.Workload("team-a/u"), r.cache.state.Workload("team-a/w")
		m := r.cache.state.Workload(b.Workload)
		return u.Placed[0].Devices[0] == w.Placed[0].Devices[0] && m.Placed[0].Order == rev
	})
	if evs := evictions(t, cl.Client, b.Workload); len(evs) != 1 || !strings.HasPrefix(evs[0].GetMessage(), "Moved from node-1 to node-1 in node pool default") {
		t.Errorf("%s's events %v, want its move", b.Workload, evs)
	}
}

// TestMoveEvent_namesOnlyItsOwnProjectsWorkload: a move's event names the
// workload it made room for in `by` when that workload is of the moved
// workload's project, and only its project when it is another tenant's;
// the message says where it went.
func TestMoveEvent_namesOnlyItsOwnProjectsWorkload(t *testing.T) {
	mv := moves{nodes: map[string][]string{"team-a/b": {"node-1", "node-3"}}}
	const reason = "moved in node pool default to make room for a workload of project "
	for forW, by := range map[string]string{"team-a/j": "projects/team-a/workloads/j", "team-ab/j": "projects/team-ab", "team-b/j": "projects/team-b"} {
		ev := &workloadv1.WorkloadEvent{By: takenBy("team-a/b", forW), Nodes: []string{"nodes/node-2", "nodes/node-4"}}
		mv.describe(ev, scheduling.Eviction{Workload: "team-a/b", For: forW, Rule: scheduling.RuleConsolidation,
			Reason: reason + projectOf(forW)})
		want := "Moved from node-2, node-4 to node-1, node-3 in node pool default to make room for a workload of project " + projectOf(forW)
		if ev.GetBy() != by || ev.GetMessage() != want {
			t.Errorf("for %s: by %q, %q; want by %q, %q", forW, ev.GetBy(), ev.GetMessage(), by, want)
		}
	}
}
