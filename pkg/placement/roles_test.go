package placement_test

import (
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
)

// roleNode is one node of a role table case: its name and roles, 4 GPUs
// each (a CPU worker is a node like the others, as roles are an
// administrator's word, not the hardware's).
type roleNode struct {
	name  string
	roles cluster.NodeRoles
}

const (
	sys = cluster.RoleSystem
	gpu = cluster.RoleGPUWorker
	cpu = cluster.RoleCPUWorker
)

var (
	gpuPod  = cluster.PodRequest{GPU: 1000, CPU: 1000}
	fracPod = cluster.PodRequest{GPU: 500}
	memPod  = cluster.PodRequest{GPUMemory: 10 << 30}
	cpuPod  = cluster.PodRequest{CPU: 1000}
)

// TestRoleAllows is the node-role step's table: for each cluster, the
// nodes a GPU and a CPU-only pod may use (binpack then tries them in name
// order when all are empty).
func TestRoleAllows(t *testing.T) {
	tests := map[string]struct {
		nodes    []roleNode
		req      cluster.PodRequest
		eligible string // the nodes allowed, comma-separated, in name order
	}{
		"no roles: every node":                     {[]roleNode{{"a", 0}, {"b", 0}}, gpuPod, "a,b"},
		"GPU pod: only gpu-workers once any":       {[]roleNode{{"a", 0}, {"b", gpu}, {"c", cpu}}, gpuPod, "b"},
		"a fraction is a GPU pod":                  {[]roleNode{{"a", 0}, {"b", gpu}}, fracPod, "b"},
		"GPU memory is a GPU pod":                  {[]roleNode{{"a", 0}, {"b", gpu}}, memPod, "b"},
		"CPU pod: only cpu-workers once any":       {[]roleNode{{"a", 0}, {"b", gpu}, {"c", cpu}}, cpuPod, "c"},
		"CPU pod, no cpu-worker: all but system":   {[]roleNode{{"a", 0}, {"b", gpu}, {"c", sys}}, cpuPod, "a,b"},
		"GPU pod, no gpu-worker: all but system":   {[]roleNode{{"a", 0}, {"b", cpu}, {"c", sys}}, gpuPod, "a,b"},
		"system nodes take nothing":                {[]roleNode{{"a", sys}}, gpuPod, ""},
		"a system gpu-worker takes GPU pods":       {[]roleNode{{"a", sys | gpu}, {"b", 0}}, gpuPod, "a"},
		"a system gpu-worker takes no CPU pod":     {[]roleNode{{"a", sys | gpu}, {"b", 0}}, cpuPod, "b"},
		"a node with both worker roles takes both": {[]roleNode{{"a", gpu | cpu}, {"b", 0}}, cpuPod, "a"},
		"a node with both worker roles, GPU pod":   {[]roleNode{{"a", gpu | cpu}, {"b", 0}}, gpuPod, "a"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := roleCluster(t, tc.nodes)
			w := submit(t, s, "j", tc.req)
			var got []string
			for _, n := range s.Pool("default").Nodes {
				if placement.RoleAllows(s, n, w) {
					got = append(got, n.Name)
				}
			}
			if g := strings.Join(got, ","); g != tc.eligible {
				t.Fatalf("eligible %q, want %q", g, tc.eligible)
			}
		})
	}
}

func roleCluster(t *testing.T, nodes []roleNode) *cluster.State {
	t.Helper()
	s := cluster.New()
	for _, n := range nodes {
		if _, err := s.AddNode(cluster.NodeSpec{Name: n.name, Pool: "default", GPUs: 4, GPUMemory: 80 << 30,
			CPU: 64000, Memory: 1 << 40, Roles: n.roles}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddProject("p", "", nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPlace_Roles: Place follows the role step, a miss says which role was
// wanted, and the roles in use follow the nodes (a role taken off the last
// node that had it, or that node removed, lets every node back in).
func TestPlace_Roles(t *testing.T) {
	s := roleCluster(t, []roleNode{{"a", 0}, {"b", gpu}, {"s", sys}})
	w := submit(t, s, "j", cluster.PodRequest{GPU: 4000})
	pods, _ := placement.Place(s, s.Pool("default"), w, 1, placement.Spread)
	if pods == nil || w.Placed[0].Node.Name != "b" {
		t.Fatalf("GPU pod placed on %v, want b", w.Placed[0].Node)
	}
	big := submit(t, s, "big", cluster.PodRequest{GPU: 4000})
	pods, miss := placement.Place(s, s.Pool("default"), big, 1, placement.Binpack)
	if pods != nil || miss.Kind != placement.NoRoom || !strings.Contains(miss.Text, "the largest free block on a gpu-worker node is 0 GPUs") {
		t.Fatalf("a second 4-GPU pod: pods %v, miss %+v; want no room on the one gpu-worker", pods, miss)
	}
	cpuOnly := submit(t, s, "c", cpuPod)
	if pods, _ := placement.Place(s, s.Pool("default"), cpuOnly, 1, placement.Binpack); pods == nil || cpuOnly.Placed[0].Node.Name == "s" {
		t.Fatalf("CPU pod: %v on %v, want a non-system node", pods, cpuOnly.Placed[0].Node)
	}

	// A cpu-worker that is not Ready: CPU pods wait for it.
	only := roleCluster(t, []roleNode{{"a", 0}, {"c", cpu}})
	only.SetReady(only.Node("c"), false)
	w = submit(t, only, "j", cpuPod)
	pods, miss = placement.Place(only, only.Pool("default"), w, 1, placement.Binpack)
	if pods != nil || miss.Kind != placement.NoNodeOfRole || !strings.Contains(miss.Text, "no Ready cpu-worker node") {
		t.Fatalf("pods %v, miss %+v; want NoNodeOfRole naming cpu-worker", pods, miss)
	}
	// The role taken off: every node again.
	spec := cluster.NodeSpec{Name: "c", Pool: "default", GPUs: 4, GPUMemory: 80 << 30, CPU: 64000, Memory: 1 << 40}
	only.Reshape(only.Node("c"), spec)
	if only.RoleInUse(cpu) {
		t.Fatal("cpu-worker still in use after the reshape")
	}
	if pods, _ := placement.Place(only, only.Pool("default"), w, 1, placement.Binpack); pods == nil || w.Placed[0].Node.Name != "a" {
		t.Fatalf("after the role was taken off: pods %v", pods)
	}
	// Removing the last gpu-worker ends that role too.
	s.RemoveNode(s.Node("b"))
	if s.RoleInUse(gpu) {
		t.Fatal("gpu-worker in use after its node was removed")
	}
}

// TestPlace_SystemOnly: a cluster of only system nodes places nothing, and
// says why.
func TestPlace_SystemOnly(t *testing.T) {
	s := roleCluster(t, []roleNode{{"s", sys}})
	w := submit(t, s, "j", gpuPod)
	pods, miss := placement.Place(s, s.Pool("default"), w, 1, placement.Binpack)
	if pods != nil || miss.Kind != placement.NoNodeOfRole || !strings.Contains(miss.Text, "no Ready non-system node") {
		t.Fatalf("pods %v, miss %+v", pods, miss)
	}
}
