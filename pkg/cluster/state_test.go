package cluster_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/cluster"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newState(t *testing.T) *cluster.State {
	t.Helper()
	s := cluster.New()
	for _, n := range []string{"n2", "n1"} {
		if _, err := s.AddNode(cluster.NodeSpec{Name: n, Pool: "default", GPUs: 2, GPUMemory: 80 << 30, CPU: 8000, Memory: 64 << 30}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddProject("p", "", nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func submit(t *testing.T, s *cluster.State, id string, gpu int64) *cluster.Workload {
	t.Helper()
	w, err := s.Submit(cluster.WorkloadSpec{ID: id, Name: id, Project: "p", Priority: cluster.PriorityTrain,
		Pods: 1, MinPods: 1, Pod: cluster.PodRequest{GPU: gpu, CPU: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// summary is what the undo log must restore exactly.
func summary(s *cluster.State) string {
	var b strings.Builder
	for _, p := range s.Pools {
		for _, n := range p.Nodes {
			b.WriteString(n.Name + " " + n.Used.String())
			for _, d := range n.Devices {
				b.WriteString(" " + cluster.FormatAmount(cluster.GPU, d.Used))
			}
			for _, ref := range n.Pods {
				b.WriteString(" " + ref.Workload.ID)
			}
			b.WriteString("\n")
		}
		b.WriteString("free " + p.Free().String() + "\n")
	}
	q := s.Queue("p")
	b.WriteString("p " + q.Usage[0].Allocated.String() + "\n")
	return b.String()
}

func TestRollbackRestoresEverything(t *testing.T) {
	s := newState(t)
	a, b, c := submit(t, s, "a", 1000), submit(t, s, "b", 500), submit(t, s, "c", 500)
	n1 := s.Node("n1")
	s.Place(a, 0, n1, []int{0}, 1000)
	s.Place(b, 0, n1, []int{1}, 500)
	s.StopLog()
	before := summary(s)

	mark := s.Mark()
	s.Unplace(a, 0)
	s.Place(c, 0, n1, []int{1}, 500)
	s.Unplace(b, 0)
	s.Place(a, 0, s.Node("n2"), []int{1}, 1000)
	s.Rollback(mark)
	s.StopLog()

	if diff := cmp.Diff(before, summary(s)); diff != "" {
		t.Errorf("state after rollback (-before +after):\n%s", diff)
	}
	if got := n1.Pods; len(got) != 2 || got[0].Workload != a || got[1].Workload != b {
		t.Errorf("n1 pods after rollback: want [a b] in placement order, got %v", got)
	}
}

// TestPlacementOrder: every pod records when it was placed relative to the
// others (SCHEDULING.md §4: for two units of one workload, the newest is
// the pod placed last), whether the state numbers it (Place) or a store
// does (PlaceInOrder, with revisions in any order); a rollback restores it.
func TestPlacementOrder(t *testing.T) {
	s := newState(t)
	w, err := s.Submit(cluster.WorkloadSpec{ID: "e", Name: "e", Project: "p", Priority: cluster.PriorityTrain,
		Pods: 3, MinPods: 1, Pod: cluster.PodRequest{GPU: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2 := s.Node("n1"), s.Node("n2")
	// A store lists pod 2 (created at revision 40) before pod 0 (revision 12).
	s.PlaceInOrder(w, 2, n1, []int{0}, 1000, 40)
	s.PlaceInOrder(w, 0, n1, []int{1}, 1000, 12)
	if !w.PlacedLater(2, 0) || w.PlacedLater(0, 2) {
		t.Errorf("pod 2 (revision 40) must count as placed after pod 0 (revision 12): orders %d, %d", w.Placed[2].Order, w.Placed[0].Order)
	}
	s.Place(w, 1, n2, []int{0}, 1000)
	if !w.PlacedLater(1, 2) {
		t.Errorf("pod 1, placed after the store's pods, has order %d, not above %d", w.Placed[1].Order, w.Placed[2].Order)
	}
	s.StopLog()

	// Pod 0 placed again now is the last placed; a rollback gives it its
	// old place in the order back.
	mark := s.Mark()
	s.Unplace(w, 0)
	s.Place(w, 0, n2, []int{1}, 1000)
	if !w.PlacedLater(0, 1) {
		t.Errorf("pod 0 placed again: order %d, not above pod 1's %d", w.Placed[0].Order, w.Placed[1].Order)
	}
	s.Rollback(mark)
	s.StopLog()
	if w.Placed[0].Node != n1 || w.Placed[0].Order != 12 {
		t.Errorf("after rollback pod 0 is on %v with order %d; want n1, 12", w.Placed[0].Node.Name, w.Placed[0].Order)
	}
}

func TestFreeIndexOrder(t *testing.T) {
	s := newState(t)
	a := submit(t, s, "a", 1000)
	s.Place(a, 0, s.Node("n2"), []int{0}, 1000)
	var asc, desc []string
	p := s.Pool("default")
	p.AscendFree(0, func(n *cluster.Node) bool { asc = append(asc, n.Name); return true })
	p.DescendFree(0, func(n *cluster.Node) bool { desc = append(desc, n.Name); return true })
	if diff := cmp.Diff([]string{"n2", "n1"}, asc); diff != "" {
		t.Errorf("least free first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"n1", "n2"}, desc); diff != "" {
		t.Errorf("most free first (-want +got):\n%s", diff)
	}
	if got := p.MaxFree(); got != 2000 {
		t.Errorf("MaxFree: want 2000, got %d", got)
	}
}

func TestNodeLossReturnsPods(t *testing.T) {
	s := newState(t)
	a := submit(t, s, "a", 2000)
	n1 := s.Node("n1")
	s.Place(a, 0, n1, []int{0, 1}, 1000)
	lost := s.SetReady(n1, false)
	if len(lost) != 1 || lost[0].Workload != a || a.PlacedPods() != 0 {
		t.Fatalf("lost pods: want a's pod, got %v (a holds %d pods)", lost, a.PlacedPods())
	}
	if got := s.Pool("default").Total.GPU; got != 2000 {
		t.Errorf("pool total after n1 is lost: want 2000 milli-GPUs, got %d", got)
	}
	if got := s.Queue("p").Usage[0].Allocated.GPU; got != 0 {
		t.Errorf("project allocation after the loss: want 0, got %d", got)
	}
}

func TestRejectedQueueLeavesNothing(t *testing.T) {
	s := cluster.New()
	_, err := s.AddProject("p", "", map[string]cluster.Quota{"missing": cluster.DefaultQuota()})
	if err == nil || !strings.Contains(err.Error(), `node pool "missing" does not exist`) {
		t.Fatalf("want an error naming the missing pool, got %v", err)
	}
	if s.Queue("p") != nil || len(s.Projects()) != 0 {
		t.Error("a rejected project was registered")
	}
	if _, err := s.AddProject("p", "", nil); err != nil {
		t.Errorf("the name is free again: %v", err)
	}
}

func TestQuotaEffectiveLimit(t *testing.T) {
	tests := map[string]struct {
		quota cluster.Quota
		want  int64
	}{
		"no limit and over-quota on is unlimited": {quota: cluster.DefaultQuota(), want: cluster.Unlimited},
		"over-quota off caps at deserved": {
			quota: func() cluster.Quota {
				q := cluster.DefaultQuota()
				q.Deserved.GPU = 3000
				q.OverQuota = false
				return q
			}(),
			want: 3000,
		},
		"a limit below deserved wins": {
			quota: func() cluster.Quota {
				q := cluster.DefaultQuota()
				q.Deserved.GPU, q.Limit.GPU, q.OverQuota = 3000, 2000, false
				return q
			}(),
			want: 2000,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.quota.EffectiveLimit(cluster.GPU); got != tc.want {
				t.Errorf("want %d, got %d", tc.want, got)
			}
		})
	}
}

// Reshape takes the node's pods off, gives it the new devices and capacity,
// and the pool's totals and free index follow.
func TestReshape(t *testing.T) {
	s := newState(t)
	a := submit(t, s, "a", 1000)
	n1 := s.Node("n1")
	s.Place(a, 0, n1, []int{1}, 1000)
	spec := cluster.NodeSpec{Name: "n1", Pool: "default", GPUs: 2, GPUMemory: 80 << 30, CPU: 8000, Memory: 64 << 30}
	if !n1.SameShape(spec) {
		t.Fatal("SameShape is false for the node's own spec")
	}
	spec.GPUs, spec.Labels = 1, map[string]string{"run.ai/type": "dgx"}
	if n1.SameShape(spec) {
		t.Fatal("SameShape is true for one GPU less")
	}
	lost := s.Reshape(n1, spec)
	if len(lost) != 1 || lost[0].Workload != a || a.PlacedPods() != 0 {
		t.Fatalf("lost %v, a holds %d pods", lost, a.PlacedPods())
	}
	if len(n1.Devices) != 1 || n1.Capacity.GPU != 1000 || n1.Used.GPU != 0 || n1.Labels["run.ai/type"] != "dgx" {
		t.Errorf("n1 after reshape: %d devices, capacity %v, used %v, labels %v", len(n1.Devices), n1.Capacity, n1.Used, n1.Labels)
	}
	if got := s.Pool("default").Total.GPU; got != 3000 {
		t.Errorf("pool total: want 3000 milli-GPUs, got %d", got)
	}
	if got := s.Queue("p").Usage[0].Allocated.GPU; got != 0 {
		t.Errorf("project allocation: want 0, got %d", got)
	}
	s.Place(a, 0, n1, []int{0}, 1000)
	if got := s.Pool("default").Free().GPU; got != 2000 {
		t.Errorf("pool free after placing on the reshaped node: want 2000, got %d", got)
	}
}
