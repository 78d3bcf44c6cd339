package cluster

import (
	"fmt"
	"time"
)

// Phase is where a workload is in its life.
type Phase int

// Phases of a workload (FORMAT.md "Statuses").
const (
	Pending Phase = iota
	Running
	Completed
	Failed
)

var phaseNames = [...]string{"Pending", "Running", "Completed", "Failed"}

func (p Phase) String() string { return phaseNames[p] }

// Priority is a named priority class (SCHEDULING.md §4).
type Priority struct {
	Name        string
	Value       int
	Preemptible bool
}

// The priority classes, highest first.
var (
	PriorityInference              = Priority{"inference", 125, false}
	PriorityBuild                  = Priority{"build", 100, false}
	PriorityInteractivePreemptible = Priority{"interactive-preemptible", 75, true}
	PriorityTrain                  = Priority{"train", 50, true}
)

// Priorities lists every class, highest first.
var Priorities = []Priority{PriorityInference, PriorityBuild, PriorityInteractivePreemptible, PriorityTrain}

// PriorityByName finds a class by name.
func PriorityByName(name string) (Priority, error) {
	for _, p := range Priorities {
		if p.Name == name {
			return p, nil
		}
	}
	return Priority{}, fmt.Errorf("unknown priority %q (want inference, build, interactive-preemptible or train)", name)
}

// DefaultPriority is the class of a workload type that names none.
func DefaultPriority(workloadType string) Priority {
	switch workloadType {
	case "inference":
		return PriorityInference
	case "workspace":
		return PriorityBuild
	default:
		return PriorityTrain
	}
}

// PodRequest is what each pod of a workload asks for. GPU is whole devices ×
// 1000 or a fraction below 1000; GPUMemory (bytes) replaces GPU with a slice
// of one device's memory.
type PodRequest struct {
	GPU       int64
	GPUMemory int64
	CPU       int64
	Memory    int64
}

// Devices is how many whole devices the pod needs (0 for a fraction).
func (r PodRequest) Devices() int {
	if r.GPUMemory > 0 || r.GPU < FullDevice {
		return 0
	}
	return int(r.GPU / FullDevice)
}

// Shares reports whether the pod takes a share of one device.
func (r PodRequest) Shares() bool {
	return r.GPUMemory > 0 || (r.GPU > 0 && r.GPU < FullDevice)
}

// ShareOn is the milli-GPUs a shared pod holds on a device of deviceMemory
// bytes: its fraction, or its memory over the device's (rounded up so that
// the memory really fits).
func (r PodRequest) ShareOn(deviceMemory int64) int64 {
	if r.GPUMemory > 0 {
		if deviceMemory <= 0 {
			return FullDevice + 1 // never fits
		}
		return (r.GPUMemory*FullDevice + deviceMemory - 1) / deviceMemory
	}
	return r.GPU
}

// Counted is the pod's request as counted against quotas before it is placed,
// with minDeviceMemory the pool's smallest device memory.
func (r PodRequest) Counted(minDeviceMemory int64) Resources {
	g := r.GPU
	if r.GPUMemory > 0 {
		g = r.ShareOn(minDeviceMemory)
	}
	return Resources{GPU: g, CPU: r.CPU, Memory: r.Memory}
}

// Placement is where one pod runs.
type Placement struct {
	Node    *Node
	Devices []int // device indexes on the node
	Share   int64 // milli-GPUs held on each device (1000 for whole devices)
	Held    Resources
	// Order is when the pod was placed, as an ordinal: of two pods, the one
	// placed last has the larger Order (SCHEDULING.md §4, "newest" for two
	// units of one workload). See State.Place and State.PlaceInOrder.
	Order int64
}

// PlacedLater reports whether pod a of w was placed after pod b. Ties (pods
// bound in one etcd transaction share its revision) go to the higher index.
func (w *Workload) PlacedLater(a, b int) bool {
	if oa, ob := w.Placed[a].Order, w.Placed[b].Order; oa != ob {
		return oa > ob
	}
	return a > b
}

// Workload is a unit of work: one or more pods scheduled as a gang.
type Workload struct {
	ID       string // unique; "project/name" in the service, the name in a scenario
	Name     string
	Project  *Queue
	Type     string // workspace, training, inference
	Priority Priority
	Pods     int
	MinPods  int
	Pod      PodRequest
	// Lead is pod 0's request where it differs from Pod (a distributed
	// training's master or launcher); nil when every pod asks for Pod.
	Lead     *PodRequest
	Pools    []string // in order of preference
	NodeType string
	// Submitted is the submission time; Seq breaks ties between equal times.
	Submitted time.Duration
	Seq       int64

	Phase       Phase
	Preemptions int
	// Placed holds one entry per pod slot; a nil Node means the pod is not placed.
	Placed []Placement
	// BelowMinSince is when the workload fell below its gang minimum while
	// holding pods; -1 when it is not below it (see StampBelowMinimum).
	BelowMinSince time.Duration
	// FirstRunning is when the workload first held its minimum (-1: never).
	FirstRunning time.Duration
	// Aside: a step of a cycle failed on it (scheduling.InvariantError), so
	// cycles neither place, evict nor move it; its pods stay counted.
	Aside bool

	pool    *Pool // where its pods are (one pool at a time)
	placed  int
	waiting bool // in its project's waiting set
}

// PodAt is what pod i asks for: Lead for pod 0 where set, else Pod.
func (w *Workload) PodAt(i int) PodRequest {
	if i == 0 && w.Lead != nil {
		return *w.Lead
	}
	return w.Pod
}

// Widest is a request at least as large as any one pod's, in every
// resource: what the victim searches make room for per pod (a master that
// differs is checked exactly when the pods are placed).
func (w *Workload) Widest() PodRequest {
	if w.Lead == nil {
		return w.Pod
	}
	r, l := w.Pod, *w.Lead
	switch {
	case l.Shares() == r.Shares() && (l.GPUMemory > 0) == (r.GPUMemory > 0):
		r.GPU, r.GPUMemory = max(r.GPU, l.GPU), max(r.GPUMemory, l.GPUMemory)
	case l.Devices() > r.Devices():
		// Whole devices and a share do not compare: the one with more devices.
		r.GPU, r.GPUMemory = l.GPU, l.GPUMemory
	}
	r.CPU, r.Memory = max(r.CPU, l.CPU), max(r.Memory, l.Memory)
	return r
}

// NextRequest is what the pods NextPods places ask for together, counted
// with the pool's smallest device memory: the first unplaced pods in index
// order (pod 0, a distributed training's master, is placed with the gang).
func (w *Workload) NextRequest(minDeviceMemory int64) Resources {
	return w.unplacedRequest(minDeviceMemory, w.NextPods())
}

func (w *Workload) unplacedRequest(minDeviceMemory int64, k int) Resources {
	if w.Lead == nil || w.Placed[0].Node != nil {
		return w.Pod.Counted(minDeviceMemory).Scale(k)
	}
	if k == 0 {
		return Resources{}
	}
	return w.Lead.Counted(minDeviceMemory).Add(w.Pod.Counted(minDeviceMemory).Scale(k - 1))
}

// PlacedPods counts pods that run.
func (w *Workload) PlacedPods() int { return w.placed }

// Pool is where the workload's pods run, nil when none does.
func (w *Workload) Pool() *Pool { return w.pool }

// Held is what the workload holds in its pool.
func (w *Workload) Held() Resources {
	var r Resources
	for _, p := range w.Placed {
		if p.Node != nil {
			r = r.Add(p.Held)
		}
	}
	return r
}

// NextPods is how many pods the workload asks for now: up to its gang minimum,
// or one more if it already holds its minimum (SCHEDULING.md §3, request(J)).
func (w *Workload) NextPods() int {
	if w.placed < w.MinPods {
		return w.MinPods - w.placed
	}
	if w.placed < w.Pods {
		return 1
	}
	return 0
}

// Wants reports whether the workload has pods to place.
func (w *Workload) Wants() bool {
	return (w.Phase == Pending || w.Phase == Running) && w.placed < w.Pods
}

// GangRank orders workloads of one priority: below the gang minimum first,
// then exactly at it, then above it (SCHEDULING.md §3).
func (w *Workload) GangRank() int {
	switch {
	case w.placed < w.MinPods:
		return 0
	case w.placed == w.MinPods:
		return 1
	default:
		return 2
	}
}

// Nodes lists the distinct nodes the workload runs on, in name order.
func (w *Workload) Nodes() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range w.Placed {
		if p.Node != nil && !seen[p.Node.Name] {
			seen[p.Node.Name] = true
			out = append(out, p.Node.Name)
		}
	}
	sortStrings(out)
	return out
}

// Older reports whether a was submitted before b (time, then sequence).
func Older(a, b *Workload) bool {
	if a.Submitted != b.Submitted {
		return a.Submitted < b.Submitted
	}
	return a.Seq < b.Seq
}

// LessInProject is the order of workloads inside one project: higher priority,
// then gang rank, then older, then name (SCHEDULING.md §3).
func LessInProject(a, b *Workload) bool {
	if a.Priority.Value != b.Priority.Value {
		return a.Priority.Value > b.Priority.Value
	}
	if ga, gb := a.GangRank(), b.GangRank(); ga != gb {
		return ga < gb
	}
	if a.Submitted != b.Submitted {
		return a.Submitted < b.Submitted
	}
	if a.ID != b.ID {
		return a.ID < b.ID
	}
	return a.Seq < b.Seq
}
