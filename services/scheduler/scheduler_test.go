package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// quickStart writes the product quick start's cluster: 2 nodes of 2 GPUs,
// team-a and team-b with 2 GPUs of quota each.
func quickStart(t testing.TB, cl *etcdtest.Cluster) {
	t.Helper()
	node(t, cl.Client, "node-1", 2)
	node(t, cl.Client, "node-2", 2)
	project(t, cl.Client, "team-a", 2)
	project(t, cl.Client, "team-b", 2)
}

// gpus reports, per project, the fair share and allocation of GPUs in the
// default pool from ListQueues, as "fairShare/allocated" in whole GPUs.
func gpus(t testing.TB, s *Server) map[string]string {
	t.Helper()
	resp, err := s.ListQueues(t.Context(), &schedulerv1.ListQueuesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, q := range resp.GetQueues() {
		if q.GetKind() != schedulerv1.QueueKind_QUEUE_KIND_PROJECT {
			continue
		}
		np := q.GetNodePools()[0]
		out[q.GetName()] = fmt.Sprintf("%d/%d", np.GetFairShare().GetMilliGpus()/1000, np.GetAllocated().GetMilliGpus()/1000)
	}
	return out
}

func evictions(t testing.TB, cli *clientv3.Client, workload string) []*workloadv1.WorkloadEvent {
	t.Helper()
	resp, err := cli.Get(t.Context(), etcdstore.PrefixEvictions+workload+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []*workloadv1.WorkloadEvent
	for _, kv := range resp.Kvs {
		ev := &workloadv1.WorkloadEvent{}
		if err := proto.Unmarshal(kv.Value, ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// TestQuickStart plays the product quick start at the store level: team-a
// runs over quota on team-b's idle GPUs; when team-b asks for its quota
// back, a1 is evicted by reclaim for b2.
func TestQuickStart(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	r := startReplica(t, cl, "r1")
	waitFor(t, 5*time.Second, "a leader", r.leading)

	for i, w := range []struct{ proj, id string }{{"team-a", "a1"}, {"team-a", "a2"}, {"team-b", "b1"}} {
		gpu := int32(1)
		if w.id == "a2" {
			gpu = 2
		}
		training(t, cl.Client, w.proj, w.id, gpu, i)
		want := w.proj + "/" + w.id
		waitFor(t, 3*time.Second, want+" bound", func() bool { return slices.Contains(bound(t, cl.Client), want) })
	}
	// The queries read the model, which follows etcd through the watch.
	overQuota := map[string]string{"projects/team-a/queue": "3/3", "projects/team-b/queue": "1/1"}
	waitFor(t, 2*time.Second, fmt.Sprintf("fairShare/allocated %v", overQuota), func() bool { return cmp.Equal(gpus(t, r.Server), overQuota) })

	training(t, cl.Client, "team-b", "b2", 1, 3)
	want := []string{"team-a/a2", "team-b/b1", "team-b/b2"}
	waitFor(t, 3*time.Second, "a2, b1, b2 bound", func() bool { return cmp.Equal(bound(t, cl.Client), want) })

	evs := evictions(t, cl.Client, "team-a/a1")
	if len(evs) != 1 || evs[0].GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_RECLAIM ||
		evs[0].GetBy() != "projects/team-b" || evs[0].GetType() != workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED {
		t.Fatalf("eviction events of a1: %v, want one PREEMPTED by reclaim for b2", evs)
	}
	waitFor(t, 2*time.Second, "queues at their fair share", func() bool {
		return cmp.Equal(gpus(t, r.Server), map[string]string{"projects/team-a/queue": "2/2", "projects/team-b/queue": "2/2"})
	})

	// a1 waits, with its reasons, and nothing moves any more.
	waitFor(t, 2*time.Second, "a1 explained", func() bool {
		ex, err := r.ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{Name: "projects/team-a/workloads/a1"})
		return err == nil && ex.GetPhase() == workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING && len(ex.GetPendingReasons()) > 0
	})
	r.mu.Lock()
	cycles := r.cycles
	r.mu.Unlock()
	waitFor(t, 3*time.Second, "two more cycles", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.cycles >= cycles+2
	})
	if got := bound(t, cl.Client); !cmp.Equal(got, want) {
		t.Errorf("after more cycles bound %v, want %v", got, want)
	}
	if n := len(evictions(t, cl.Client, "team-a/a1")); n != 1 {
		t.Errorf("a1 evicted %d times, want once", n)
	}
	ex, err := r.ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{Name: "projects/team-b/workloads/b2"})
	if err != nil {
		t.Fatal(err)
	}
	if d := ex.GetLastDecision(); d.GetOutcome() != schedulerv1.DecisionOutcome_DECISION_OUTCOME_PLACED ||
		d.GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_RECLAIM || !cmp.Equal(d.GetWorkloads(), []string{"projects/team-a/workloads/a1"}) {
		t.Errorf("b2's last decision %v, want PLACED by reclaim of a1", d)
	}
}

// TestFailover: two replicas on one etcd; when the leader's session is
// closed the other leads and schedules within 2 s, and a plan fenced with
// the old leader's election key is rejected.
func TestFailover(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	a, b := startReplica(t, cl, "a"), startReplica(t, cl, "b")
	waitFor(t, 5*time.Second, "a leader", func() bool { return a.leading() || b.leading() })
	leader, other := a, b
	if b.leading() {
		leader, other = b, a
	}
	info, err := other.GetLeader(t.Context(), &schedulerv1.GetLeaderRequest{Name: "leader"})
	if err != nil || info.GetReplica() != leader.cfg.Replica || info.GetIsSelf() {
		t.Fatalf("GetLeader on the follower: %v, %v; want %s", info, err, leader.cfg.Replica)
	}
	training(t, cl.Client, "team-a", "a1", 1, 0)
	waitFor(t, 3*time.Second, "a1 bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-a/a1") })

	leader.mu.Lock()
	old := leader.leader.fence
	leader.mu.Unlock()
	start := time.Now()
	leader.stop() // closes its session: the lease is revoked, the key deleted
	training(t, cl.Client, "team-b", "b1", 1, 1)
	waitFor(t, 2*time.Second, "b1 bound by the new leader", func() bool { return slices.Contains(bound(t, cl.Client), "team-b/b1") })
	t.Logf("failover and a cycle in %s", time.Since(start).Round(time.Millisecond))
	if !other.leading() {
		t.Fatal("the other replica does not lead")
	}
	info, err = other.GetLeader(t.Context(), &schedulerv1.GetLeaderRequest{Name: "leader"})
	if err != nil || !info.GetIsSelf() || info.GetElectionRevision() <= old.Rev {
		t.Fatalf("GetLeader on the new leader: %v, %v", info, err)
	}

	// The deposed leader's plan cannot commit.
	key := etcdstore.PrefixBindings + bindingID("node-2", "team-b/stale", 0)
	_, err = apply(t.Context(), cl.Client, old, writes{groups: []group{{workload: "team-b/stale",
		ops: []write{{key: key, msg: &workloadv1.PodStatus{Node: "nodes/node-2"}, checked: true}}}}}, 0)
	if !errors.Is(err, etcdstore.ErrConflict) {
		t.Fatalf("apply with the old fence: %v, want ErrConflict", err)
	}
	if resp, err := cl.Client.Get(t.Context(), key); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the stale binding was written: %v %v", resp, err)
	}
	// The new leader's fence works.
	other.mu.Lock()
	cur := other.leader.fence
	other.mu.Unlock()
	if _, err := apply(t.Context(), cl.Client, cur, writes{}, 0); err != nil {
		t.Fatalf("apply of nothing with the current fence: %v", err)
	}
}

// placements summarises a cache's model: every workload's pods as
// "node:devices:share" and phase, and every queue's allocation per pool.
func placements(c *Cache) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, w := range c.state.Workloads() {
		for i, p := range w.Placed {
			if p.Node != nil {
				out = append(out, fmt.Sprintf("%s/%d on %s %v %d", w.ID, i, p.Node.Name, p.Devices, p.Share))
			}
		}
		out = append(out, fmt.Sprintf("%s %s", w.ID, w.Phase))
	}
	for _, q := range c.state.Projects() {
		for i, u := range q.Usage {
			out = append(out, fmt.Sprintf("%s pool %d allocated %v", q.Name, i, u.Allocated))
		}
	}
	sort.Strings(out)
	return out
}

// TestRestart: a new replica rebuilds the same model from etcd.
func TestRestart(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	r := startReplica(t, cl, "r1")
	training(t, cl.Client, "team-a", "a1", 1, 0)
	training(t, cl.Client, "team-a", "a2", 2, 1)
	training(t, cl.Client, "team-b", "b1", 1, 2)
	waitFor(t, 5*time.Second, "a1, a2, b1 bound", func() bool {
		return cmp.Equal(bound(t, cl.Client), []string{"team-a/a1", "team-a/a2", "team-b/b1"})
	})
	// The old replica's model has seen every binding before it stops.
	rev := bindingsRevision(t, cl.Client)
	if !r.cache.WaitRevision(t.Context(), rev, 3*time.Second) {
		t.Fatalf("the first replica never saw revision %d", rev)
	}
	r.stop()
	want := placements(r.cache)

	r2 := startReplica(t, cl, "r2")
	if !r2.cache.WaitRevision(t.Context(), rev, 3*time.Second) {
		t.Fatalf("the new replica never saw revision %d", rev)
	}
	if diff := cmp.Diff(want, placements(r2.cache)); diff != "" {
		t.Fatalf("rebuilt model (-before +after):\n%s", diff)
	}
	if got, want := gpus(t, r2.Server), map[string]string{"projects/team-a/queue": "3/3", "projects/team-b/queue": "1/1"}; !cmp.Equal(got, want) {
		t.Errorf("after restart fairShare/allocated %v, want %v", got, want)
	}
}

// TestNodeLostAndDeletedWorkload: with no grace (NodeLostGrace negative),
// bindings on a node that stops being Ready are deleted with a NODE_LOST
// event and the pod is bound elsewhere; the bindings of a deleted workload
// are deleted.
func TestNodeLostAndDeletedWorkload(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	r := startReplica(t, cl, "r1", func(c *Config) { c.NodeLostGrace = -1 })
	training(t, cl.Client, "team-a", "a1", 2, 0)
	var first string
	waitFor(t, 3*time.Second, "a1 bound", func() bool {
		resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		first = string(resp.Kvs[0].Key)
		return true
	})
	lost := "node-1"
	if !slices.Contains([]string{etcdstore.PrefixBindings + bindingID("node-1", "team-a/a1", 0)}, first) {
		lost = "node-2"
	}
	n := &nodemanagerv1.Node{}
	resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixNodes+lost)
	if err != nil || proto.Unmarshal(resp.Kvs[0].Value, n) != nil {
		t.Fatal(err)
	}
	n.Readiness = nodemanagerv1.Readiness_READINESS_NOT_READY
	put(t, cl.Client, etcdstore.PrefixNodes+lost, n)
	waitFor(t, 3*time.Second, "a1 bound on the other node", func() bool {
		resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Key) != first
	})
	if evs := evictions(t, cl.Client, "team-a/a1"); len(evs) != 1 || evs[0].GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_LOST {
		t.Errorf("events %v, want one NODE_LOST", evs)
	}

	if _, err := cl.Client.Delete(t.Context(), etcdstore.PrefixWorkloads+"team-a/a1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "no bindings", func() bool { return len(bound(t, cl.Client)) == 0 })
	waitFor(t, 2*time.Second, "team-a at 0/0 after the delete", func() bool { return gpus(t, r.Server)["projects/team-a/queue"] == "0/0" })
}

// TestApply_WorkloadWhole: a plan is packed into transactions of whole
// workloads, never splitting one; a workload whose writes exceed one
// transaction is left out (errGroupTooLarge) and the others are written.
func TestApply_WorkloadWhole(t *testing.T) {
	cl := etcdtest.New(t)
	f := testFence(t, cl)
	gang := func(wid string, pods int) group {
		g := group{workload: wid}
		for i := range pods {
			g.ops = append(g.ops, write{key: etcdstore.PrefixBindings + bindingID("n", wid, i), msg: &workloadv1.PodStatus{Index: int32(i)}, checked: true})
		}
		return g
	}
	// maxOps 5: 4 writes per transaction. a (2) and b (2) fit together, c
	// (3) needs its own, d (5) fits in none.
	w := writes{groups: []group{gang("p/a", 2), gang("p/b", 2), gang("p/c", 3), gang("p/d", 5)}}
	res, err := apply(t.Context(), cl.Client, f, w, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res.dropped["p/d"], errGroupTooLarge) || len(res.dropped) != 1 {
		t.Fatalf("dropped %v, want only p/d (too large)", res.dropped)
	}
	got, err := cl.Client.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	revs := map[string]map[int64]bool{}
	for _, kv := range got.Kvs {
		b, err := parseBinding(string(kv.Key)[len(etcdstore.PrefixBindings):], &workloadv1.PodStatus{})
		if err != nil {
			t.Fatal(err)
		}
		if revs[b.Workload] == nil {
			revs[b.Workload] = map[int64]bool{}
		}
		revs[b.Workload][kv.ModRevision] = true
	}
	if len(got.Kvs) != 7 || len(revs) != 3 || revs["p/d"] != nil {
		t.Fatalf("%d bindings of %d workloads (%v), want the 7 of a, b and c", len(got.Kvs), len(revs), revs)
	}
	for wid, r := range revs {
		if len(r) != 1 {
			t.Errorf("workload %s written in %d transactions, want one", wid, len(r))
		}
	}
	if res.rev != f.Rev+2 || res.bindingRev != res.rev {
		t.Errorf("apply at revision %d (bindings %d) after the fence at %d, want 2 transactions", res.rev, res.bindingRev, f.Rev)
	}
	// Written again, every create-if-absent condition fails: nothing moves.
	if _, err := apply(t.Context(), cl.Client, f, w, 5); !errors.Is(err, etcdstore.ErrConflict) {
		t.Fatalf("second apply: %v, want ErrConflict", err)
	}
}

// testFence puts an election-like key and returns it as a fence.
func testFence(t *testing.T, cl *etcdtest.Cluster) fence {
	t.Helper()
	resp, err := cl.Client.Grant(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	key := etcdstore.PrefixElectionScheduler + "/x"
	pr, err := cl.Client.Put(t.Context(), key, "r1", clientv3.WithLease(resp.ID))
	if err != nil {
		t.Fatal(err)
	}
	return fence{Key: key, Rev: pr.Header.Revision}
}

// bindingsRevision is the ModRevision of the latest binding write.
func bindingsRevision(t testing.TB, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var rev int64
	for _, kv := range resp.Kvs {
		rev = max(rev, kv.ModRevision)
	}
	return rev
}

// TestGangAndSuspend: a gang of two 2-GPU pods takes both nodes in one
// plan and stays put; suspending it deletes its bindings.
func TestGangAndSuspend(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	r := startReplica(t, cl, "r1")
	w := &workloadv1.Workload{
		Name: "projects/team-a/workloads/dist", Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		CreateTime: timestamppb.New(t0),
		Spec: &workloadv1.WorkloadSpec{Image: "x", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 2}},
			Pods: 2, MinPods: 2},
		Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING},
	}
	put(t, cl.Client, etcdstore.PrefixWorkloads+"team-a/dist", w)
	keys := func() []string {
		resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			out = append(out, string(kv.Key)[len(etcdstore.PrefixBindings):])
		}
		return out
	}
	want := []string{"node-1/team-a.dist.0", "node-2/team-a.dist.1"}
	alt := []string{"node-1/team-a.dist.1", "node-2/team-a.dist.0"}
	waitFor(t, 3*time.Second, "both pods bound", func() bool { k := keys(); return cmp.Equal(k, want) || cmp.Equal(k, alt) })
	got := keys()
	r.mu.Lock()
	cycles := r.cycles
	r.mu.Unlock()
	waitFor(t, 3*time.Second, "two more cycles", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.cycles >= cycles+2
	})
	if k := keys(); !cmp.Equal(k, got) {
		t.Fatalf("bindings moved: %v, then %v", got, k)
	}
	if ex, err := r.ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{Name: w.GetName()}); err != nil ||
		ex.GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING {
		t.Errorf("ExplainWorkload: %v, %v; want RUNNING", ex, err)
	}

	w.Spec.Suspended = true
	put(t, cl.Client, etcdstore.PrefixWorkloads+"team-a/dist", w)
	waitFor(t, 3*time.Second, "no bindings after the suspend", func() bool { return len(keys()) == 0 })
	if evs := evictions(t, cl.Client, "team-a/dist"); len(evs) != 0 {
		t.Errorf("a suspend is not an eviction, got events %v", evs)
	}
}
