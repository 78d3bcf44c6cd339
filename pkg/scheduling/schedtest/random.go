package schedtest

import (
	"fmt"
	"slices"
	"time"

	"pgregory.net/rapid"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// Spec is a whole cluster as data, so that one drawn cluster can be built
// more than once (and in more than one order).
type Spec struct {
	Pools       []string // after "default"
	Nodes       []cluster.NodeSpec
	Departments []QueueSpec // creation order
	Projects    []QueueSpec // creation order, after the departments
	Workloads   []cluster.WorkloadSpec
	// Running are the bindings of a first cycle that saw Workloads[:Early]
	// only; the rest are submitted after it.
	Early   int
	Running []scheduling.Binding
	// Lost are nodes that go down after the first cycle: their pods are lost
	// and gangs may be left below their minimum.
	Lost []string
	// Config is the placement strategy and gang timeout to schedule with.
	Config scheduling.Config
}

// QueueSpec is a department or a project.
type QueueSpec struct {
	Name, Department string
	Quotas           map[string]cluster.Quota
}

// Random draws a cluster (see RandomSpec) and builds it.
func Random(t *rapid.T) *cluster.State { return RandomSpec(t).Build(nil) }

// RandomSpec draws 1–3 pools, 1–12 nodes of 1–8 GPUs (some typed, a few not
// Ready), 1–3 departments and 1–6 projects with random deserved quotas,
// limits, weights and over-quota, and 1–30 workloads of every priority:
// whole GPUs, fractions, GPU memory, CPU only, gangs with a minimum, some
// elastic, some for two pools. A first cycle runs on the workloads submitted
// early and its bindings are kept, so the later ones meet running work; a
// node may then be lost.
func RandomSpec(t *rapid.T) *Spec {
	sp := &Spec{Config: scheduling.DefaultConfig()}
	if rapid.Bool().Draw(t, "spread") {
		sp.Config.Placement = placement.Spread
	}
	pools := []string{"default"}
	for i := range rapid.IntRange(0, 2).Draw(t, "extraPools") {
		sp.Pools = append(sp.Pools, fmt.Sprintf("pool%d", i+1))
	}
	pools = append(pools, sp.Pools...)
	types := []string{"", "", "a100", "h100"}

	for i := range rapid.IntRange(1, 12).Draw(t, "nodes") {
		n := NodeSpec(fmt.Sprintf("n%02d", i), rapid.SampledFrom(pools).Draw(t, "pool"), rapid.IntRange(1, 8).Draw(t, "gpus"),
			DeviceMemoryGiB(rapid.SampledFrom([]float64{40, 80}).Draw(t, "deviceMemory")),
			Cores(rapid.SampledFrom([]float64{8, 32, 64}).Draw(t, "cores")),
			RAMGiB(rapid.SampledFrom([]float64{64, 512}).Draw(t, "ram")))
		if ty := rapid.SampledFrom(types).Draw(t, "type"); ty != "" {
			Type(ty)(&n)
		}
		n.NotReady = rapid.IntRange(0, 9).Draw(t, "notReady") == 0
		sp.Nodes = append(sp.Nodes, n)
	}

	for i := range rapid.IntRange(1, 3).Draw(t, "departments") {
		sp.Departments = append(sp.Departments, QueueSpec{Name: fmt.Sprintf("d%d", i), Quotas: randomQuotas(t, pools, true)})
	}
	for i := range rapid.IntRange(1, 6).Draw(t, "projects") {
		dept := ""
		if k := rapid.IntRange(-1, len(sp.Departments)-1).Draw(t, "department"); k >= 0 {
			dept = sp.Departments[k].Name
		}
		sp.Projects = append(sp.Projects, QueueSpec{Name: fmt.Sprintf("p%d", i), Department: dept, Quotas: randomQuotas(t, pools, false)})
	}

	var at time.Duration
	for i := range rapid.IntRange(1, 30).Draw(t, "workloads") {
		at += time.Duration(rapid.IntRange(0, 1).Draw(t, "later")) * time.Second
		sp.Workloads = append(sp.Workloads, randomWorkload(t, fmt.Sprintf("w%02d", i), at, sp.Projects, pools, types))
	}
	sp.Early = rapid.IntRange(0, len(sp.Workloads)).Draw(t, "early")

	// The first cycle, on the early workloads only.
	s := sp.build(nil, false)
	sp.Running = scheduling.Cycle(s, sp.Config).Bindings
	var hosts []string // nodes running something, in name order
	for _, b := range sp.Running {
		if !slices.Contains(hosts, b.Node) {
			hosts = append(hosts, b.Node)
		}
	}
	slices.Sort(hosts)
	if len(hosts) > 0 && rapid.Bool().Draw(t, "loseNode") {
		sp.Lost = []string{rapid.SampledFrom(hosts).Draw(t, "lost")}
	}
	return sp
}

func randomQuotas(t *rapid.T, pools []string, department bool) map[string]cluster.Quota {
	out := map[string]cluster.Quota{}
	for _, p := range pools {
		if rapid.IntRange(0, 4).Draw(t, "defaultQuota") == 0 {
			continue // DefaultQuota
		}
		q := cluster.DefaultQuota()
		if department {
			q.Deserved.GPU = rapid.SampledFrom([]int64{cluster.Unlimited, 0, 2000, 4000, 8000, 16000}).Draw(t, "deserved")
		} else {
			q.Deserved.GPU = rapid.SampledFrom([]int64{0, 500, 1000, 2000, 3000, 4000, 8000}).Draw(t, "deserved")
		}
		rare := 4 // one in rare has a limit, one in 2*rare over-quota off
		if department {
			rare = 8
		}
		if rapid.IntRange(1, rare).Draw(t, "limited") == 1 {
			q.Limit.GPU = max(q.Deserved.GPU, 0) + rapid.SampledFrom([]int64{0, 1000, 2000, 4000}).Draw(t, "limit")
		}
		if rapid.IntRange(0, 3).Draw(t, "cpuQuota") == 0 {
			q.Deserved.CPU = rapid.SampledFrom([]int64{0, 4000, 16000}).Draw(t, "deservedCPU")
			if rapid.Bool().Draw(t, "cpuLimited") {
				q.Limit.CPU = q.Deserved.CPU + 8000
			}
		}
		q.Weight = cluster.SameWeights(rapid.SampledFrom([]float64{0, 1, 1, 2, 3}).Draw(t, "weight"))
		q.OverQuota = rapid.IntRange(1, 2*rare).Draw(t, "noOverQuota") != 1
		out[p] = q
	}
	return out
}

func randomWorkload(t *rapid.T, name string, at time.Duration, projects []QueueSpec, pools, types []string) cluster.WorkloadSpec {
	prio := rapid.SampledFrom([]cluster.Priority{cluster.PriorityTrain, cluster.PriorityTrain, cluster.PriorityTrain,
		cluster.PriorityInteractivePreemptible, cluster.PriorityInteractivePreemptible,
		cluster.PriorityBuild, cluster.PriorityInference}).Draw(t, "priority")
	w := cluster.WorkloadSpec{ID: name, Name: name, Type: "training", Priority: prio, Submitted: at,
		Project: rapid.SampledFrom(projects).Draw(t, "project").Name}
	switch rapid.IntRange(0, 5).Draw(t, "kind") {
	case 0, 1, 2:
		w.Pod.GPU = rapid.SampledFrom([]int64{1000, 1000, 2000, 4000, 8000}).Draw(t, "wholeGPUs")
	case 3:
		w.Pod.GPU = rapid.SampledFrom([]int64{100, 250, 300, 500, 700}).Draw(t, "fraction")
	case 4:
		w.Pod.GPUMemory = cluster.BytesFromGiB(rapid.SampledFrom([]float64{10, 20, 40}).Draw(t, "gpuMemory"))
	}
	w.Pod.CPU = rapid.SampledFrom([]int64{0, 500, 2000, 8000}).Draw(t, "cpu")
	w.Pod.Memory = cluster.BytesFromGiB(rapid.SampledFrom([]float64{0, 1, 16}).Draw(t, "memory"))
	if w.Pod.GPU == 0 && w.Pod.GPUMemory == 0 && w.Pod.CPU == 0 {
		w.Pod.CPU = 1000
	}
	w.Pods = rapid.IntRange(1, 4).Draw(t, "pods")
	w.MinPods = rapid.IntRange(1, w.Pods).Draw(t, "minPods")
	w.Pools = []string{rapid.SampledFrom(pools).Draw(t, "pool")}
	if len(pools) > 1 && rapid.IntRange(0, 3).Draw(t, "twoPools") == 0 {
		if other := rapid.SampledFrom(pools).Draw(t, "pool2"); other != w.Pools[0] {
			w.Pools = append(w.Pools, other)
		}
	}
	if rapid.IntRange(0, 4).Draw(t, "typed") == 0 {
		w.NodeType = rapid.SampledFrom(types).Draw(t, "nodeType")
	}
	return w
}

// Build makes the state: pools, nodes, departments, projects, workloads in
// submission order, the first cycle's bindings, then the lost nodes. With t
// non-nil, the things whose order means nothing are done in a drawn order:
// nodes are added shuffled, and the running pods are placed shuffled (each
// keeping the first cycle's placement order, Placement.Order).
func (sp *Spec) Build(t *rapid.T) *cluster.State { return sp.build(t, true) }

func (sp *Spec) build(t *rapid.T, all bool) *cluster.State {
	s := cluster.New()
	for _, p := range sp.Pools {
		s.AddPool(p)
	}
	nodes, running := sp.Nodes, sp.Running
	if t != nil {
		nodes = rapid.Permutation(nodes).Draw(t, "nodeOrder")
		running = rapid.Permutation(running).Draw(t, "placeOrder")
	}
	for _, n := range nodes {
		must(s.AddNode(n))
	}
	for _, d := range sp.Departments {
		must(s.AddDepartment(d.Name, d.Quotas))
	}
	for _, p := range sp.Projects {
		must(s.AddProject(p.Name, p.Department, p.Quotas))
	}
	ws := sp.Workloads
	if !all {
		ws = ws[:sp.Early]
	}
	for _, w := range ws {
		must(s.Submit(w))
	}
	if !all {
		return s
	}
	if err := scheduling.Apply(s, scheduling.Plan{Bindings: running}, 0); err != nil {
		panic(fmt.Sprintf("schedtest: replaying the first cycle: %v", err))
	}
	// When each pod was placed does mean something (the newest of two
	// units of one workload): the first cycle's order, whatever order the
	// pods were placed in here (a store lists them in any order too).
	for i, b := range sp.Running {
		w := s.Workload(b.Workload)
		w.Placed[b.Pod].Order = int64(i + 1)
	}
	for _, name := range sp.Lost {
		for _, ref := range s.SetReady(s.Node(name), false) {
			if ref.Workload.PlacedPods() == 0 {
				scheduling.Requeue(s, ref.Workload)
			}
		}
		s.StampBelowMinimum(0)
	}
	return s
}
