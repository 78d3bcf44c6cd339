package scheduler

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// TestPodKey_RefusesSecondBinding: a plan made on a model that has not
// seen a pod's binding binds it elsewhere; etcd refuses it (the pod's key
// exists) and nothing is written.
func TestPodKey_RefusesSecondBinding(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	training(t, cl.Client, "team-a", "a1", 1, 0)
	r := startReplica(t, cl, "r1", func(c *Config) { c.Interval = time.Hour })
	waitFor(t, 3*time.Second, "a1 bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-a/a1") })
	r.stop()
	first := bindingKeys(t, cl.Client)

	// A stale model: the same cluster without the binding.
	stale := newCache(cl.Client, time.Now, r.log, r.metrics, 0)
	stale.mu.Lock()
	r.cache.mu.Lock()
	stale.state = cluster.New()
	stale.workloads, stale.nodes, stale.bindings, stale.byPod = r.cache.workloads, r.cache.nodes, map[string]binding{}, map[podKey]string{}
	r.cache.mu.Unlock()
	b, _ := parseBinding(strings.TrimPrefix(first[0], etcdstore.PrefixBindings), &workloadv1.PodStatus{})
	other := "node-1"
	if b.Node == other {
		other = "node-2"
	}
	ws := stale.planWrites(scheduling.Plan{Bindings: []scheduling.Binding{{Workload: "team-a/a1", Pod: 0, Node: other, Devices: []int{0}, Share: 1000}}}, t0)
	stale.mu.Unlock()
	f := testFence(t, cl)
	if _, err := apply(t.Context(), cl.Client, f, ws, 0); err == nil || !strings.Contains(err.Error(), etcdstore.PrefixPods+"team-a/a1/0: exists") {
		t.Fatalf("second binding of team-a/a1 pod 0: %v, want a conflict on its pod key", err)
	}
	if got := bindingKeys(t, cl.Client); !slices.Equal(got, first) {
		t.Fatalf("bindings %v, want only %v", got, first)
	}
}

func bindingKeys(t *testing.T, cli *clientv3.Client) []string {
	t.Helper()
	resp, err := cli.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// TestCycle_WaitsForItsWrites: while the model has not seen the last plan's
// bindings, the leader computes no new plan; once it has, it goes on.
func TestCycle_WaitsForItsWrites(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	release := make(chan struct{})
	var once sync.Once
	hold := func(batch []update) {
		for _, u := range batch {
			if u.kind == kindBinding {
				<-release
				return
			}
		}
	}
	r := startReplica(t, cl, "r1", func(c *Config) { c.ApplyWait = 100 * time.Millisecond; c.Interval = 20 * time.Millisecond })
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	r.cache.mu.Lock()
	r.cache.beforeApply = hold
	r.cache.mu.Unlock()
	waitFor(t, 5*time.Second, "a leader", r.leading)
	training(t, cl.Client, "team-a", "a1", 1, 0)
	waitFor(t, 3*time.Second, "a1 bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-a/a1") })
	waitFor(t, 3*time.Second, "a skipped cycle", func() bool { return testutil.ToFloat64(r.metrics.modelBehind) > 0 })
	r.mu.Lock()
	cycles := r.cycles
	r.mu.Unlock()
	time.Sleep(300 * time.Millisecond) // a dozen ticks
	r.mu.Lock()
	after := r.cycles
	r.mu.Unlock()
	if after != cycles {
		t.Fatalf("%d cycles ran on a model without the last plan's bindings", after-cycles)
	}
	once.Do(func() { close(release) })
	training(t, cl.Client, "team-b", "b1", 1, 1)
	waitFor(t, 3*time.Second, "b1 bound once the model caught up", func() bool { return slices.Contains(bound(t, cl.Client), "team-b/b1") })
}

// TestCycle_InvariantFailureContained: a panic of the scheduling core drops
// that plan, is counted, sets the workload aside with a reason it can
// show, and the replica goes on scheduling the others.
func TestCycle_InvariantFailureContained(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	faulty := func(s *cluster.State, cfg scheduling.Config) scheduling.Plan {
		if s.Workload("team-a/bad") != nil {
			scheduling.Cycle(s, cfg) // leaves its marks on the state
			s.Mark()
			panic(scheduling.InvariantError{Workload: "team-a/bad", What: "the victims chosen did not make room"})
		}
		return scheduling.Cycle(s, cfg)
	}
	r := startReplica(t, cl, "r1", func(c *Config) { c.cycle = faulty })
	waitFor(t, 5*time.Second, "a leader", r.leading)
	training(t, cl.Client, "team-a", "bad", 1, 0)
	training(t, cl.Client, "team-b", "b1", 1, 1)
	waitFor(t, 3*time.Second, "b1 bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-b/b1") })
	if slices.Contains(bound(t, cl.Client), "team-a/bad") {
		t.Error("the workload whose cycle failed was bound")
	}
	if n := testutil.ToFloat64(r.metrics.invariantFailures); n < 1 {
		t.Errorf("invariant failures counted %v, want at least 1", n)
	}
	waitFor(t, 3*time.Second, "bad's reason recorded", func() bool {
		resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixReasons+"team-a/bad")
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		st := &workloadv1.WorkloadStatus{}
		return proto.Unmarshal(resp.Kvs[0].Value, st) == nil && len(st.GetPendingReasons()) == 1 &&
			strings.Contains(st.GetPendingReasons()[0].GetMessage(), "set this workload aside") &&
			!strings.Contains(st.GetPendingReasons()[0].GetMessage(), "did not make room") // the detail stays in the log
	})
	if !r.leading() {
		t.Error("the replica stopped leading")
	}
	// The model is intact: b1's GPU is counted, the rest is free.
	waitFor(t, 2*time.Second, "team-b at 1 GPU", func() bool { return gpus(t, r.Server)["projects/team-b/queue"] == "1/1" })
}

// TestCache_SkipsUndecodable: a value that does not decode is skipped and
// counted; the model follows everything else.
func TestCache_SkipsUndecodable(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	if _, err := cl.Client.Put(t.Context(), etcdstore.PrefixWorkloads+"team-a/garbled", "\xff\xff not a workload"); err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, cl, "r1")
	waitFor(t, 5*time.Second, "a leader", r.leading)
	training(t, cl.Client, "team-a", "a1", 1, 0)
	if _, err := cl.Client.Put(t.Context(), etcdstore.PrefixNodes+"node-9", "\xff\xff not a node"); err != nil {
		t.Fatal(err)
	}
	training(t, cl.Client, "team-b", "b1", 1, 1)
	waitFor(t, 3*time.Second, "a1 and b1 bound", func() bool {
		got := bound(t, cl.Client)
		return slices.Contains(got, "team-a/a1") && slices.Contains(got, "team-b/b1")
	})
	if n := testutil.ToFloat64(r.metrics.undecodable.WithLabelValues(etcdstore.PrefixWorkloads)); n != 1 {
		t.Errorf("undecodable workloads counted %v, want 1", n)
	}
	waitFor(t, 2*time.Second, "the garbled node counted", func() bool {
		return testutil.ToFloat64(r.metrics.undecodable.WithLabelValues(etcdstore.PrefixNodes)) == 1
	})
	r.cache.mu.Lock()
	lists := r.cache.lists
	r.cache.mu.Unlock()
	if lists != 1 {
		t.Errorf("the cache listed %d times, want once (no relist loop)", lists)
	}
}

// TestCycle_PanicInEveryStepContained: a panic in any step of a cycle (the
// core's allocate, reclaim, preempt and consolidate, and the writes of the
// plan) sets aside only the workload that step was working on, with a
// SET_ASIDE event, its reason and a count by step; the next cycle schedules
// every other workload. A 3-GPU workload on nodes of 2 GPUs goes through
// every step of the core; a 1-GPU one is bound, so its writes are built.
func TestCycle_PanicInEveryStepContained(t *testing.T) {
	tests := []struct {
		step scheduling.Step
		gpus int32
	}{
		{scheduling.StepAllocate, 1},
		{scheduling.StepReclaim, 3},
		{scheduling.StepPreempt, 3},
		{scheduling.StepConsolidate, 3},
		{stepApply, 1},
	}
	for _, tc := range tests {
		t.Run(string(tc.step), func(t *testing.T) {
			cl := etcdtest.New(t)
			quickStart(t, cl)
			inject := func(workload string) {
				if workload == "team-a/bad" {
					panic("injected")
				}
			}
			r := startReplica(t, cl, "r1", func(c *Config) {
				if tc.step == stepApply {
					c.onWrite = inject
					return
				}
				c.Scheduling = scheduling.DefaultConfig()
				c.Scheduling.Observe = func(step scheduling.Step, workload string) {
					if step == tc.step {
						inject(workload)
					}
				}
			})
			waitFor(t, 5*time.Second, "a leader", r.leading)
			training(t, cl.Client, "team-a", "bad", tc.gpus, 0)
			training(t, cl.Client, "team-b", "b1", 1, 1)
			waitFor(t, 5*time.Second, "b1 bound", func() bool { return slices.Contains(bound(t, cl.Client), "team-b/b1") })
			if slices.Contains(bound(t, cl.Client), "team-a/bad") {
				t.Error("the workload whose step failed was bound")
			}
			if n := testutil.ToFloat64(r.metrics.setAside.WithLabelValues(string(tc.step))); n != 1 {
				t.Errorf("set aside in %s counted %v, want 1", tc.step, n)
			}
			waitFor(t, 3*time.Second, "bad's SET_ASIDE event", func() bool {
				resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixEvictions+"team-a/bad/", clientv3.WithPrefix())
				if err != nil {
					return false
				}
				for _, kv := range resp.Kvs {
					ev := &workloadv1.WorkloadEvent{}
					if proto.Unmarshal(kv.Value, ev) == nil && ev.GetType() == workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SET_ASIDE &&
						strings.Contains(ev.GetMessage(), "the scheduler's "+string(tc.step)+" step failed on it") &&
						!strings.Contains(ev.GetMessage(), "injected") {
						return true
					}
				}
				return false
			})
			if !r.leading() {
				t.Error("the replica stopped leading")
			}
		})
	}
}
