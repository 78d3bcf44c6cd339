package cluster_test

import (
	"testing"

	"github.com/runwayhq/runway/pkg/cluster"
)

// Removing a node, a project and a pool leaves the state as if they had
// never been added: the pool's free index and totals, queue usage, and the
// later pools' indexes.
func TestRemove_asIfNeverAdded(t *testing.T) {
	s := newState(t)
	s.AddPool("a100")
	n3, err := s.AddNode(cluster.NodeSpec{Name: "n3", Pool: "a100", GPUs: 4, GPUMemory: 80 << 30, CPU: 8000, Memory: 64 << 30})
	if err != nil {
		t.Fatal(err)
	}
	s.AddPool("h100")
	w := submit(t, s, "w1", 1000)
	s.Place(w, 0, s.Node("n1"), []int{0}, 1000)
	if _, err := s.AddProject("q", "", map[string]cluster.Quota{"h100": {Deserved: cluster.Resources{GPU: 3000}}}); err != nil {
		t.Fatal(err)
	}
	want := newState(t)
	want.AddPool("h100")
	ww := submit(t, want, "w1", 1000)
	want.Place(ww, 0, want.Node("n1"), []int{0}, 1000)
	if _, err := want.AddProject("q", "", map[string]cluster.Quota{"h100": {Deserved: cluster.Resources{GPU: 3000}}}); err != nil {
		t.Fatal(err)
	}

	lost, removed, nodes := s.RemovePool(s.Pool("a100"))
	if len(lost) != 0 || len(removed) != 0 || len(nodes) != 1 || nodes[0] != n3 || s.Node("n3") != nil {
		t.Fatalf("RemovePool(a100) = %v, %v, %v; want its node n3 only", lost, removed, nodes)
	}
	if got := s.Pool("h100").Index; got != 1 {
		t.Errorf("h100 at index %d after a100 went, want 1", got)
	}
	if got, w := summary(s), summary(want); got != w {
		t.Errorf("after RemovePool:\n%s\nwant\n%s", got, w)
	}
	if q := s.Queue("q"); q.Quotas[1].Deserved.GPU != 3000 {
		t.Errorf("q's h100 quota %v after the shift, want 3 GPUs", q.Quotas[1])
	}

	// n1 goes with w1's pod; the free index holds n2 only.
	lost = s.RemoveNode(s.Node("n1"))
	if len(lost) != 1 || lost[0].Workload != w || w.PlacedPods() != 0 {
		t.Fatalf("RemoveNode(n1) lost %v, want w1's pod", lost)
	}
	var free []string
	s.Pool("default").AscendFree(0, func(n *cluster.Node) bool { free = append(free, n.Name); return true })
	if len(free) != 1 || free[0] != "n2" || s.Pool("default").Total.GPU != 2000 || s.Queue("p").Usage[0].Allocated.GPU != 0 {
		t.Errorf("after RemoveNode(n1): free nodes %v, total %v, p's usage %v; want n2, 2 GPUs, none",
			free, s.Pool("default").Total, s.Queue("p").Usage[0])
	}

	projects, removed := s.RemoveQueue(s.Queue(cluster.DefaultDepartment))
	if len(projects) != 2 || len(removed) != 1 || removed[0] != w || s.Workload("w1") != nil || s.Queue("p") != nil ||
		len(s.Projects()) != 0 || len(s.Departments) != 0 {
		t.Errorf("RemoveQueue(default) = %v, %v; want p and q with w1, and no queue left", projects, removed)
	}
}
