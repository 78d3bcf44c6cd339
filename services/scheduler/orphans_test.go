package scheduler

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// orphanOut is what orphanWrites asked for: the binding deletes and the
// events, in order.
type orphanOut struct {
	dels   []string
	events []string
}

func (o *orphanOut) del(bid string) { o.dels = append(o.dels, bid) }
func (o *orphanOut) event(wid string, ev *workloadv1.WorkloadEvent) {
	o.events = append(o.events, fmt.Sprintf("%s %v %d %q", wid, ev.GetRule(), ev.GetPods(), ev.GetMessage()))
}

// orphansByWalk is the definition orphanWrites keeps to: every binding in
// key order, deleted when its workload is gone or not schedulable, or its
// node is gone and its workload is in the model.
func orphansByWalk(c *Cache, now time.Time) orphanOut {
	var out orphanOut
	ids := make([]string, 0, len(c.bindings))
	for bid := range c.bindings {
		ids = append(ids, bid)
	}
	sort.Strings(ids)
	type lostKey struct {
		workload string
		rule     workloadv1.SchedulingRule
	}
	lost := map[lostKey]int{}
	var order []lostKey
	for _, bid := range ids {
		b := c.bindings[bid]
		if raw, ok := c.workloads[b.Workload]; !ok || !schedulable(raw) {
			out.del(bid)
			continue
		}
		rule := c.nodeGone(b.Node)
		if rule == workloadv1.SchedulingRule_SCHEDULING_RULE_UNSPECIFIED || c.state.Workload(b.Workload) == nil {
			continue
		}
		out.del(bid)
		k := lostKey{b.Workload, rule}
		if _, seen := lost[k]; !seen {
			order = append(order, k)
		}
		lost[k]++
	}
	for _, k := range order {
		out.event(k.workload, lostEvent(k.rule, lost[k], now))
	}
	return out
}

// TestOrphanWrites_matchesAWalkOfEveryBinding: through random watch events
// (workloads submitted, finished, suspended, deleted; nodes Ready, NotReady,
// drained, deleted and lost after the grace; bindings put and deleted),
// orphanWrites, which looks only at its suspects, deletes the same
// bindings in the same order with the same events as a walk of every
// binding, cycle after cycle, and finds orphans in a good share of cycles.
func TestOrphanWrites_matchesAWalkOfEveryBinding(t *testing.T) {
	now := t0
	const grace = 10 * time.Second
	c := newCache(nil, func() time.Time { return now }, slog.New(slog.NewTextHandler(io.Discard, nil)), newMetrics(), grace)
	rev := int64(1)
	apply := func(u update) {
		rev++
		u.rev = rev
		c.record(u)
	}
	const nodes, projects, workloads, pods = 6, 2, 12, 2
	apply(update{kind: kindProject, id: "p0", msg: &quotav1.Project{Name: "projects/p0", Department: "departments/default"}})
	apply(update{kind: kindProject, id: "p1", msg: &quotav1.Project{Name: "projects/p1", Department: "departments/default"}})
	apply(update{kind: kindPool, id: "default", msg: &quotav1.NodePool{Name: "nodepools/default"}})
	r := rand.New(rand.NewPCG(17, 4))
	nodeMsg := func(id string) *nodemanagerv1.Node {
		n := &nodemanagerv1.Node{Name: "nodes/" + id, Readiness: nodemanagerv1.Readiness_READINESS_READY,
			Capacity: &commonv1.ResourceQuantity{MilliGpus: 8000, MilliCpu: 64000, MemoryBytes: 512 << 30}}
		switch r.IntN(6) {
		case 0:
			n.Readiness = nodemanagerv1.Readiness_READINESS_NOT_READY
		case 1:
			n.Drained, n.DrainEvicts = true, r.IntN(2) == 0
		}
		return n
	}
	workloadMsg := func(wid string) *workloadv1.Workload {
		w := &workloadv1.Workload{Name: "projects/" + wid[:2] + "/workloads/" + wid[3:], Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			CreateTime: timestamppb.New(t0),
			Spec: &workloadv1.WorkloadSpec{Image: "x", Pods: pods, Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}},
				MilliCpu: 100, MemoryBytes: 100 << 20},
			Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING}}
		switch r.IntN(8) {
		case 0:
			w.Status.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED
		case 1:
			w.Spec.Suspended = true
		}
		return w
	}
	wid := func() string { return fmt.Sprintf("p%d/w-%d", r.IntN(projects), r.IntN(workloads)) }
	nid := func() string { return fmt.Sprintf("n-%d", r.IntN(nodes)) }
	found := 0
	const cycles = 3000
	for cycle := range cycles {
		for range 1 + r.IntN(4) {
			switch k := r.IntN(20); {
			case k < 5:
				w := wid()
				apply(update{kind: kindWorkload, id: w, msg: workloadMsg(w)})
			case k < 6:
				apply(update{kind: kindWorkload, id: wid(), removed: true})
			case k < 9:
				n := nid()
				apply(update{kind: kindNode, id: n, msg: nodeMsg(n)})
			case k < 10:
				apply(update{kind: kindNode, id: nid(), removed: true})
			case k < 17:
				w, n := wid(), nid()
				ps := &workloadv1.PodStatus{Index: int32(r.IntN(pods)), Node: "nodes/" + n, DeviceIndexes: []int32{int32(r.IntN(8))}, FractionMilli: 1000}
				apply(update{kind: kindBinding, id: bindingID(n, w, int(ps.Index)), msg: ps})
			default:
				// A binding goes (an orphan's delete comes back, or another's).
				if len(c.bindings) > 0 {
					ids := make([]string, 0, len(c.bindings))
					for bid := range c.bindings {
						ids = append(ids, bid)
					}
					slices.Sort(ids)
					apply(update{kind: kindBinding, id: ids[r.IntN(len(ids))], removed: true})
				}
			}
		}
		c.sync()
		now = now.Add(time.Duration(r.IntN(4)) * time.Second)
		c.expireGraces(now)
		want := orphansByWalk(c, now)
		var got orphanOut
		c.orphanWrites(got.del, got.event, now)
		if !slices.Equal(got.dels, want.dels) || !slices.Equal(got.events, want.events) {
			t.Fatalf("cycle %d: orphanWrites deletes %v with events %v; a walk of every binding deletes %v with %v",
				cycle, got.dels, got.events, want.dels, want.events)
		}
		if len(want.dels) > 0 {
			found++
		}
	}
	if found < cycles/10 {
		t.Fatalf("orphans in %d of %d cycles: the events do not exercise orphanWrites", found, cycles)
	}
}

// BenchmarkPlanWrites is a cycle's write planning at 1,000 nodes / 8,000
// bindings and 5,000 / 40,000, with 100 bindings arriving between two
// cycles (a busy cluster: the bindings of the last plan) and no orphan: what
// the leader holds the cache's lock for besides scheduling.Cycle.
func BenchmarkPlanWrites(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d,bindings=%d", nodes, nodes*8), func(b *testing.B) {
			s := benchServer(b, nodes, nodes*10)
			c := s.cache
			ids := make([]string, 0, len(c.bindings))
			for bid := range c.bindings {
				ids = append(ids, bid)
			}
			slices.Sort(ids)
			now, rev := time.Now(), int64(len(ids))
			for b.Loop() {
				for i := range 100 {
					rev++
					bid := ids[(int(rev)+i)%len(ids)]
					old := c.bindings[bid]
					c.record(update{kind: kindBinding, id: bid, rev: rev,
						msg: &workloadv1.PodStatus{Index: int32(old.Pod), Node: "nodes/" + old.Node, DeviceIndexes: []int32{int32(old.Devices[0])}, FractionMilli: 1000}})
				}
				if ws := c.planWrites(scheduling.Plan{}, now); !ws.empty() {
					b.Fatalf("%d groups of writes, want none", len(ws.groups))
				}
			}
		})
	}
}
