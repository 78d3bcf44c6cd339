package schedtest

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"pgregory.net/rapid"

	"github.com/runwayhq/runway/pkg/cluster"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestBuilders(t *testing.T) {
	s := NewCluster().At(5*time.Second).
		Node("n1", 2, Type("a100"), Cores(8)).
		Pool("big").Node("b1", 4, DeviceMemoryGiB(40), Down()).
		Department("d", 3, InPool("big"), Deserved(-1), Limit(8)).
		Project("p", "d", Deserved(1), Weight(2), NoOverQuota()).
		Project("q", "").
		Workload(
			W("w").Project("p").GPU(0.5).CPU(1).Pods(3).MinPods(2).Priority(cluster.PriorityBuild).On("n1").At(time.Second),
			W("x").Project("q").GPU(1).OnDevices("n1", 1),
			W("y").Project("q").GPUMemoryGiB(20).Pools("big", "default").NodeType("a100")).
		State()

	d, p := s.Queue("d"), s.Queue("p")
	if got := d.Quotas[0].Deserved.GPU; got != 3000 {
		t.Errorf("d deserves %d milli-GPUs in default, want 3000", got)
	}
	if got := d.Quotas[1]; got.Deserved.GPU != cluster.Unlimited || got.Limit.GPU != 8000 {
		t.Errorf("d in big: %+v, want deserved unlimited and limit 8 GPUs", got)
	}
	if got := p.Quotas[0]; got.Deserved.GPU != 1000 || got.Weight != cluster.SameWeights(2) || got.OverQuota || p.Parent != d {
		t.Errorf("p: %+v under %s", got, p.Parent.Name)
	}
	if got := s.Queue("q").Parent.Name; got != cluster.DefaultDepartment {
		t.Errorf("q is under %s", got)
	}
	if n := s.Node("b1"); n.Ready || n.Devices[0].Memory != 40<<30 || n.Pool.Name != "big" {
		t.Errorf("b1: Ready %v, device memory %d, pool %s", n.Ready, n.Devices[0].Memory, n.Pool.Name)
	}

	w := s.Workload("w")
	if w.Phase != cluster.Running || w.PlacedPods() != 1 || w.MinPods != 2 || w.BelowMinSince != 5*time.Second ||
		w.FirstRunning != 5*time.Second || w.Submitted != time.Second || w.Priority != cluster.PriorityBuild {
		t.Errorf("w: %+v", w)
	}
	if at := w.Placed[0]; at.Node.Name != "n1" || !cmp.Equal(at.Devices, []int{0}) || at.Share != 500 || at.Held.CPU != 1000 {
		t.Errorf("w pod 0 at %s %v share %d held %v", at.Node.Name, at.Devices, at.Share, at.Held)
	}
	if at := s.Workload("x").Placed[0]; !cmp.Equal(at.Devices, []int{1}) || at.Share != cluster.FullDevice {
		t.Errorf("x at %v share %d", at.Devices, at.Share)
	}
	y := s.Workload("y")
	if y.Phase != cluster.Pending || y.Pod.GPUMemory != 20<<30 || !cmp.Equal(y.Pools, []string{"big", "default"}) || y.NodeType != "a100" {
		t.Errorf("y: %+v", y)
	}
}

func TestOnPanicsWhenThePodDoesNotFit(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for 3 GPUs on a 2-GPU node")
		}
	}()
	NewCluster().Node("n1", 2).Project("p", "").Workload(W("w").Project("p").GPU(3).On("n1"))
}

// Random clusters build, their workloads are submitted in order, and the
// first cycle's pods are in place.
func TestRandom(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sp := RandomSpec(t)
		s := sp.Build(t)
		ws := s.Workloads()
		if len(ws) != len(sp.Workloads) {
			t.Fatalf("%d workloads, want %d", len(ws), len(sp.Workloads))
		}
		for i, w := range ws {
			if w.ID != sp.Workloads[i].ID {
				t.Fatalf("workload %d is %s, want %s", i, w.ID, sp.Workloads[i].ID)
			}
		}
		lost := map[string]bool{}
		for _, n := range sp.Lost {
			lost[n] = true
		}
		for _, b := range sp.Running {
			at := s.Workload(b.Workload).Placed[b.Pod]
			if lost[b.Node] != (at.Node == nil) {
				t.Fatalf("%s pod %d: bound to %s (lost %v), placed on %v", b.Workload, b.Pod, b.Node, lost[b.Node], at.Node)
			}
		}
	})
}
