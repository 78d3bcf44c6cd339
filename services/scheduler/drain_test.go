package scheduler

import (
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// setNode rewrites a stored node through change.
func setNode(t *testing.T, cl *etcdtest.Cluster, id string, change func(*nodemanagerv1.Node)) {
	t.Helper()
	resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixNodes+id)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("node %s: %v", id, err)
	}
	n := &nodemanagerv1.Node{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, n); err != nil {
		t.Fatal(err)
	}
	change(n)
	put(t, cl.Client, etcdstore.PrefixNodes+id, n)
}

// A drain without eviction keeps what runs and takes nothing new; with
// eviction the pods go back to pending under NODE_DRAINED and run
// elsewhere; undrain restores the node.
func TestDrain(t *testing.T) {
	cl := etcdtest.New(t)
	node(t, cl.Client, "node-1", 2)
	project(t, cl.Client, "team-a", 4)
	r := startReplica(t, cl, "r1")
	training(t, cl.Client, "team-a", "a1", 1, 0)
	waitFor(t, 3*time.Second, "a1 bound", func() bool { return len(bound(t, cl.Client)) == 1 })

	setNode(t, cl, "node-1", func(n *nodemanagerv1.Node) { n.Drained = true })
	// The watches of nodes and workloads are apart: a2 must not reach the
	// model before the drain does.
	waitFor(t, 3*time.Second, "node-1 cordoned in the model", func() bool {
		r.cache.mu.Lock()
		defer r.cache.mu.Unlock()
		n := r.cache.state.Node("node-1")
		return n != nil && n.Cordoned
	})
	training(t, cl.Client, "team-a", "a2", 1, 1)
	time.Sleep(time.Second) // five cycles
	if got := bound(t, cl.Client); len(got) != 1 || got[0] != "team-a/a1" {
		t.Fatalf("drained without eviction: bound %v, want a1 alone (kept, nothing new)", got)
	}
	if evs := evictions(t, cl.Client, "team-a/a1"); len(evs) != 0 {
		t.Errorf("a drain without eviction evicted: %v", evs)
	}

	node(t, cl.Client, "node-2", 2)
	setNode(t, cl, "node-1", func(n *nodemanagerv1.Node) { n.Drained, n.DrainEvicts = true, true })
	waitFor(t, 3*time.Second, "a1 and a2 bound on node-2", func() bool {
		resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixBindings+"node-2/", clientv3.WithPrefix())
		return err == nil && len(resp.Kvs) == 2 && len(bound(t, cl.Client)) == 2
	})
	evs := evictions(t, cl.Client, "team-a/a1")
	if len(evs) != 1 || evs[0].GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_DRAINED || evs[0].GetMessage() != "1 pods evicted: their node was drained." {
		t.Errorf("events %v, want one NODE_DRAINED", evs)
	}

	setNode(t, cl, "node-1", func(n *nodemanagerv1.Node) { n.Drained, n.DrainEvicts = false, false })
	training(t, cl.Client, "team-a", "a3", 2, 2)
	waitFor(t, 3*time.Second, "a3 bound on the undrained node-1", func() bool {
		resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixBindings+"node-1/", clientv3.WithPrefix())
		return err == nil && len(resp.Kvs) == 1
	})
}

// A node whose key goes (its agent's lease expired) keeps its pods for the
// grace period, takes nothing new, and gets them back if it returns; past
// the grace they are lost (NODE_LOST).
func TestNodeLostGrace(t *testing.T) {
	cl := etcdtest.New(t)
	node(t, cl.Client, "node-1", 2)
	project(t, cl.Client, "team-a", 4)
	startReplica(t, cl, "r1", func(c *Config) { c.NodeLostGrace = 1500 * time.Millisecond })
	training(t, cl.Client, "team-a", "a1", 1, 0)
	waitFor(t, 3*time.Second, "a1 bound", func() bool { return len(bound(t, cl.Client)) == 1 })

	resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixNodes+"node-1")
	if err != nil {
		t.Fatal(err)
	}
	back := resp.Kvs[0].Value
	if _, err := cl.Client.Delete(t.Context(), etcdstore.PrefixNodes+"node-1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	if got := bound(t, cl.Client); len(got) != 1 {
		t.Fatalf("within the grace: bound %v, want a1 kept", got)
	}
	if _, err := cl.Client.Put(t.Context(), etcdstore.PrefixNodes+"node-1", string(back)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past the first grace: the node came back
	if got, evs := bound(t, cl.Client), evictions(t, cl.Client, "team-a/a1"); len(got) != 1 || len(evs) != 0 {
		t.Fatalf("after the node came back: bound %v, events %v; want a1 kept, no event", got, evs)
	}

	if _, err := cl.Client.Delete(t.Context(), etcdstore.PrefixNodes+"node-1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "a1's binding deleted past the grace", func() bool { return len(bound(t, cl.Client)) == 0 })
	if evs := evictions(t, cl.Client, "team-a/a1"); len(evs) != 1 || evs[0].GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_LOST {
		t.Errorf("events %v, want one NODE_LOST", evs)
	}
}

// A node stored NotReady (a Kubernetes node's Ready condition) keeps its
// pods for the grace period, takes nothing new, and gets new pods again
// once Ready; a second spell has a grace of its own, and past it the pods
// are lost (NODE_LOST). The scheduler's clock is the test's: 5 minutes (the
// Kubernetes runtime's default) pass without waiting them.
func TestNodeNotReadyGrace(t *testing.T) {
	cl := etcdtest.New(t)
	node(t, cl.Client, "node-1", 2)
	project(t, cl.Client, "team-a", 4)
	var skew atomic.Int64
	advance := func(d time.Duration) { skew.Add(int64(d)) }
	r := startReplica(t, cl, "r1", func(c *Config) {
		c.NodeLostGrace = 5 * time.Minute
		c.Clock = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	training(t, cl.Client, "team-a", "a1", 1, 0)
	waitFor(t, 3*time.Second, "a1 bound", func() bool { return len(bound(t, cl.Client)) == 1 })
	setReady := func(ready bool) {
		setNode(t, cl, "node-1", func(n *nodemanagerv1.Node) {
			n.Readiness, n.ReadinessMessage = nodemanagerv1.Readiness_READINESS_READY, "Kubernetes node Ready."
			if !ready {
				n.Readiness, n.ReadinessMessage = nodemanagerv1.Readiness_READINESS_NOT_READY, "Kubernetes node not Ready (NodeStatusUnknown)"
			}
		})
	}
	modelNode := func() (ready, cordoned bool) {
		r.cache.mu.Lock()
		defer r.cache.mu.Unlock()
		n := r.cache.state.Node("node-1")
		return n != nil && n.Ready, n != nil && n.Cordoned
	}

	setReady(false)
	waitFor(t, 3*time.Second, "NotReady node-1 cordoned in the model, its pods kept", func() bool {
		ready, cordoned := modelNode()
		return ready && cordoned
	})
	training(t, cl.Client, "team-a", "a2", 1, 1)
	advance(4 * time.Minute)
	time.Sleep(time.Second) // five cycles
	if got, evs := bound(t, cl.Client), evictions(t, cl.Client, "team-a/a1"); len(got) != 1 || got[0] != "team-a/a1" || len(evs) != 0 {
		t.Fatalf("NotReady for 4 of 5 minutes: bound %v, a1's events %v; want a1 alone kept, no event, nothing new", got, evs)
	}
	// Another write of the still NotReady node starts no new grace.
	setNode(t, cl, "node-1", func(n *nodemanagerv1.Node) { n.ReadinessMessage = "still not Ready" })

	setReady(true)
	waitFor(t, 3*time.Second, "a2 bound on node-1 Ready again", func() bool { return len(bound(t, cl.Client)) == 2 })
	if evs := evictions(t, cl.Client, "team-a/a1"); len(evs) != 0 {
		t.Fatalf("a1's events after node-1 came back: %v, want none", evs)
	}

	// A second spell: its own 5 minutes, not what is left of the first.
	setReady(false)
	waitFor(t, 3*time.Second, "node-1 cordoned again", func() bool { _, cordoned := modelNode(); return cordoned })
	advance(4 * time.Minute)
	time.Sleep(time.Second)
	if got := bound(t, cl.Client); len(got) != 2 {
		t.Fatalf("second spell, 4 of its 5 minutes: bound %v, want a1 and a2 kept", got)
	}
	advance(time.Minute)
	waitFor(t, 3*time.Second, "the bindings on node-1 deleted past the grace", func() bool { return len(bound(t, cl.Client)) == 0 })
	for _, w := range []string{"team-a/a1", "team-a/a2"} {
		if evs := evictions(t, cl.Client, w); len(evs) != 1 || evs[0].GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_NODE_LOST {
			t.Errorf("%s's events %v, want one NODE_LOST", w, evs)
		}
	}
	if ready, _ := modelNode(); ready {
		t.Error("node-1 past its grace is Ready in the model")
	}
	// Written again while it stays NotReady, it is not given a new grace.
	setNode(t, cl, "node-1", func(n *nodemanagerv1.Node) { n.ReadinessMessage = "still not Ready" })
	time.Sleep(500 * time.Millisecond)
	if ready, _ := modelNode(); ready {
		t.Error("node-1 written again while NotReady past its grace is Ready in the model")
	}
}
