package placement_test

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster of three 4-GPU nodes: n-a holds 3 GPUs, n-b 1 GPU, n-c nothing,
// and n-b's held GPU is half of device 0 (a shared device).
func busy(t *testing.T) *cluster.State {
	t.Helper()
	s := cluster.New()
	for _, n := range []string{"n-c", "n-a", "n-b"} {
		if _, err := s.AddNode(cluster.NodeSpec{Name: n, Pool: "default", GPUs: 4, GPUMemory: 80 << 30, CPU: 64000, Memory: 1 << 40}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddProject("p", "", nil); err != nil {
		t.Fatal(err)
	}
	hold := submit(t, s, "hold", cluster.PodRequest{GPU: 3000})
	s.Place(hold, 0, s.Node("n-a"), []int{0, 1, 2}, 1000)
	half := submit(t, s, "half", cluster.PodRequest{GPU: 500})
	s.Place(half, 0, s.Node("n-b"), []int{0}, 500)
	s.StopLog()
	return s
}

func submit(t *testing.T, s *cluster.State, id string, req cluster.PodRequest) *cluster.Workload {
	t.Helper()
	w, err := s.Submit(cluster.WorkloadSpec{ID: id, Name: id, Project: "p", Priority: cluster.PriorityTrain, Pods: 1, MinPods: 1, Pod: req})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestPlace(t *testing.T) {
	tests := map[string]struct {
		req         cluster.PodRequest
		strategy    placement.Strategy
		wantNode    string
		wantDevices []int
	}{
		"binpack puts a whole GPU on the least free node that fits": {
			req: cluster.PodRequest{GPU: 1000}, strategy: placement.Binpack, wantNode: "n-a", wantDevices: []int{3},
		},
		"spread puts it on the most free node": {
			req: cluster.PodRequest{GPU: 1000}, strategy: placement.Spread, wantNode: "n-c", wantDevices: []int{0},
		},
		"binpack puts a fraction on a shared device it fits on": {
			req: cluster.PodRequest{GPU: 250}, strategy: placement.Binpack, wantNode: "n-b", wantDevices: []int{0},
		},
		"a GPU-memory slice counts against the device's memory": {
			req: cluster.PodRequest{GPUMemory: 40 << 30}, strategy: placement.Binpack, wantNode: "n-b", wantDevices: []int{0},
		},
		"two whole GPUs skip the node with one idle device": {
			req: cluster.PodRequest{GPU: 2000}, strategy: placement.Binpack, wantNode: "n-b", wantDevices: []int{1, 2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := busy(t)
			w := submit(t, s, "j", tc.req)
			pods, why := placement.Place(s, s.Pool("default"), w, 1, tc.strategy)
			if pods == nil {
				t.Fatalf("not placed: %s", why.Text)
			}
			at := w.Placed[pods[0]]
			if at.Node.Name != tc.wantNode || !slices.Equal(at.Devices, tc.wantDevices) {
				t.Errorf("want %s %v, got %s %v", tc.wantNode, tc.wantDevices, at.Node.Name, at.Devices)
			}
		})
	}
}

func TestPlaceFailureSaysWhy(t *testing.T) {
	s := busy(t)
	w := submit(t, s, "big", cluster.PodRequest{GPU: 5000})
	pods, why := placement.Place(s, s.Pool("default"), w, 1, placement.Binpack)
	if pods != nil {
		t.Fatal("a 5-GPU pod was placed on 4-GPU nodes")
	}
	if want := (placement.Miss{Kind: placement.NoRoom, Requested: cluster.Resources{GPU: 5000}, Largest: cluster.Resources{GPU: 4000},
		Nodes: 3, Text: "needs 5 GPUs on one node; the largest free block is 4 GPUs"}); why != want {
		t.Errorf("reason: want %+v, got %+v", want, why)
	}
	gang, err := s.Submit(cluster.WorkloadSpec{ID: "gang", Name: "gang", Project: "p", Priority: cluster.PriorityTrain,
		Pods: 3, MinPods: 3, Pod: cluster.PodRequest{GPU: 4000}})
	if err != nil {
		t.Fatal(err)
	}
	before := s.Pool("default").Free()
	if pods, why := placement.Place(s, s.Pool("default"), gang, 3, placement.Binpack); pods != nil ||
		why.Kind != placement.NotAllTogether || !strings.Contains(why.Text, "3 pods of 4 GPUs on one node; 1 fit") {
		t.Errorf("gang of 3 × 4 GPUs with one idle node: want failure with the count, got pods %v, %+v", pods, why)
	}
	if after := s.Pool("default").Free(); after != before || gang.PlacedPods() != 0 {
		t.Errorf("a failed gang left pods behind: free %v → %v, %d pods placed", before, after, gang.PlacedPods())
	}
}

// An unhealthy device takes no pod, whole or fraction, and a pod that no
// longer fits says which device is out; a cordoned node keeps its pods
// and takes nothing new.
func TestPlace_unhealthyAndCordoned(t *testing.T) {
	s := cluster.New()
	for _, n := range []string{"n-a", "n-b"} {
		if _, err := s.AddNode(cluster.NodeSpec{Name: n, Pool: "default", GPUs: 2, GPUMemory: 80 << 30, CPU: 64000, Memory: 1 << 40,
			Unhealthy: map[int]string{0: "XID 79: GPU has fallen off the bus"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddProject("p", "", nil); err != nil {
		t.Fatal(err)
	}
	p := s.Pool("default")
	if p.Total.GPU != 2000 || p.Unhealthy != 2 {
		t.Fatalf("pool total %d, unhealthy %d: want 2 healthy GPUs and 2 unhealthy", p.Total.GPU, p.Unhealthy)
	}
	for i, req := range []cluster.PodRequest{{GPU: 1000}, {GPU: 500}} {
		w := submit(t, s, []string{"whole", "half"}[i], req)
		pods, m := placement.Place(s, p, w, 1, placement.Binpack)
		if len(pods) != 1 || slices.Contains(w.Placed[0].Devices, 0) {
			t.Fatalf("%v: placed %v on devices %v (%s), want device 1", req, pods, w.Placed[0].Devices, m.Text)
		}
	}
	w := submit(t, s, "two", cluster.PodRequest{GPU: 2000})
	if _, m := placement.Place(s, p, w, 1, placement.Binpack); !strings.Contains(m.Text, "n-a GPU 0 (XID 79: GPU has fallen off the bus)") {
		t.Errorf("miss = %q, want it to name the unhealthy device", m.Text)
	}

	held := s.Node("n-a").Pods
	s.SetCordoned(s.Node("n-a"), true)
	s.SetCordoned(s.Node("n-b"), true)
	if !slices.Equal(s.Node("n-a").Pods, held) || len(held) == 0 {
		t.Errorf("a cordoned node lost its pods: %v, had %v", s.Node("n-a").Pods, held)
	}
	cpu := submit(t, s, "cpu", cluster.PodRequest{CPU: 1000})
	if pods, m := placement.Place(s, p, cpu, 1, placement.Binpack); len(pods) != 0 || !strings.Contains(m.Text, "no Ready node") {
		t.Errorf("placed on cordoned nodes: %v (%q)", pods, m.Text)
	}
	s.SetCordoned(s.Node("n-b"), false)
	if pods, _ := placement.Place(s, p, cpu, 1, placement.Binpack); len(pods) != 1 || cpu.Placed[0].Node.Name != "n-b" {
		t.Errorf("uncordoned n-b takes no pod")
	}
}

// A pod bigger than every node says so in plain words, with the resource
// that falls short and the largest node's total and free CPU, memory and
// GPUs; one that only waits for room does not.
func TestPlaceNeverFitsSaysWhichResource(t *testing.T) {
	s := busy(t)
	w := submit(t, s, "cpu", cluster.PodRequest{GPU: 1000, CPU: 128000, Memory: 16 << 30})
	pods, why := placement.Place(s, s.Pool("default"), w, 1, placement.Binpack)
	if pods != nil {
		t.Fatal("a 128-core pod was placed on 64-core nodes")
	}
	want := "needs 1 GPU on one node; the largest free block is 4 GPUs; the most free on one node is 64 cores of CPU and 1024 GiB of memory" +
		"; it can never fit in node pool default: a pod needs 128 cores of CPU, more than any node has" +
		"; the largest node, n-a, has 64 cores, 1024 GiB of memory and 4 GPUs in all (64 cores, 1024 GiB of memory and 1 GPU free)"
	if why.Text != want || why.Kind != placement.NoRoom {
		t.Errorf("reason:\nwant %s\ngot  %s (kind %v)", want, why.Text, why.Kind)
	}
	mem := submit(t, s, "mem", cluster.PodRequest{Memory: 2 << 40, CPU: 1000})
	if _, why := placement.Place(s, s.Pool("default"), mem, 1, placement.Binpack); !strings.Contains(why.Text, "a pod needs 2048 GiB of memory, more than any node has") {
		t.Errorf("memory: %s", why.Text)
	}
	// Room for 4 GPUs and 8 cores exists on an empty node; only busy now.
	s.Place(submit(t, s, "fill", cluster.PodRequest{GPU: 4000}), 0, s.Node("n-c"), []int{0, 1, 2, 3}, 1000)
	waits := submit(t, s, "waits", cluster.PodRequest{GPU: 4000, CPU: 8000})
	if _, why := placement.Place(s, s.Pool("default"), waits, 1, placement.Binpack); strings.Contains(why.Text, "never") ||
		why.Text != "needs 4 GPUs on one node; the largest free block is 3.5 GPUs; the most free on one node is 64 cores of CPU" {
		t.Errorf("busy, not too big: %s", why.Text)
	}
}
