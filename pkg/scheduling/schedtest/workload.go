package schedtest

import (
	"fmt"
	"time"

	"github.com/runwayhq/runway/pkg/cluster"
)

// Workload describes a workload to submit. Defaults: one pod, minPods =
// pods, priority train, pool "default", submitted at 0, nothing asked.
type Workload struct {
	spec    cluster.WorkloadSpec
	minPods int // 0: as many as pods
	on      []podAt
}

// podAt is where one pod already runs: devices nil to let the builder pick.
type podAt struct {
	node    string
	devices []int
}

// W starts a workload named name (its ID too).
func W(name string) *Workload {
	return &Workload{spec: cluster.WorkloadSpec{ID: name, Name: name, Type: "training",
		Priority: cluster.PriorityTrain, Pods: 1}}
}

// Project sets the workload's project.
func (w *Workload) Project(p string) *Workload { w.spec.Project = p; return w }

// GPU asks for GPUs per pod: whole devices (1, 2 ...) or a fraction (0.5).
func (w *Workload) GPU(g float64) *Workload { w.spec.Pod.GPU = cluster.MilliFromFloat(g); return w }

// GPUMemoryGiB asks for a slice of one device's memory per pod instead.
func (w *Workload) GPUMemoryGiB(g float64) *Workload {
	w.spec.Pod.GPUMemory = cluster.BytesFromGiB(g)
	w.spec.Pod.GPU = 0
	return w
}

// CPU asks for cores per pod.
func (w *Workload) CPU(cores float64) *Workload {
	w.spec.Pod.CPU = cluster.MilliFromFloat(cores)
	return w
}

// MemoryGiB asks for memory per pod.
func (w *Workload) MemoryGiB(g float64) *Workload {
	w.spec.Pod.Memory = cluster.BytesFromGiB(g)
	return w
}

// Master gives pod 0 its own request (a distributed training's master):
// GPUs (whole or a fraction) and cores.
func (w *Workload) Master(gpu, cores float64) *Workload {
	w.spec.Lead = &cluster.PodRequest{GPU: cluster.MilliFromFloat(gpu), CPU: cluster.MilliFromFloat(cores)}
	return w
}

// Pods sets the gang's size.
func (w *Workload) Pods(n int) *Workload { w.spec.Pods = n; return w }

// MinPods sets how many pods must run together (default: all).
func (w *Workload) MinPods(n int) *Workload { w.minPods = n; return w }

// Priority sets the priority class.
func (w *Workload) Priority(p cluster.Priority) *Workload { w.spec.Priority = p; return w }

// Pools lists the node pools to try, in order.
func (w *Workload) Pools(pools ...string) *Workload { w.spec.Pools = pools; return w }

// NodeType restricts the workload to nodes of a type.
func (w *Workload) NodeType(t string) *Workload { w.spec.NodeType = t; return w }

// At sets the submission time.
func (w *Workload) At(d time.Duration) *Workload { w.spec.Submitted = d; return w }

// On puts the workload's pods, one per name in order, on those nodes: it is
// Running there from the start. Pods not named stay unplaced, so naming fewer
// than the gang minimum leaves it running below its minimum. Whole GPUs take
// the lowest idle devices; a fraction takes the fullest device it fits on.
func (w *Workload) On(nodes ...string) *Workload {
	for _, n := range nodes {
		w.on = append(w.on, podAt{node: n})
	}
	return w
}

// OnDevices puts the next pod on node using exactly these devices.
func (w *Workload) OnDevices(node string, devices ...int) *Workload {
	w.on = append(w.on, podAt{node: node, devices: devices})
	return w
}

// Spec is the cluster.WorkloadSpec the builder submits.
func (w *Workload) Spec() cluster.WorkloadSpec {
	spec := w.spec
	spec.MinPods = w.minPods
	if spec.MinPods == 0 {
		spec.MinPods = spec.Pods
	}
	return spec
}

func (w *Workload) build(s *cluster.State, now time.Duration) {
	wl := must(s.Submit(w.Spec()))
	if len(w.on) > wl.Pods {
		panic(fmt.Sprintf("schedtest: workload %s: %d placements for %d pods", wl.ID, len(w.on), wl.Pods))
	}
	for pod, at := range w.on {
		n := s.Node(at.node)
		if n == nil {
			panic(fmt.Sprintf("schedtest: workload %s: node %q does not exist", wl.ID, at.node))
		}
		req := wl.PodAt(pod)
		devs, share := at.devices, cluster.FullDevice
		switch {
		case req.Shares():
			if devs == nil {
				devs = fullestFit(n, req)
			}
			if len(devs) == 1 {
				share = req.ShareOn(n.Devices[devs[0]].Memory)
			}
		case req.GPU == 0:
			devs, share = nil, 0
		case devs == nil:
			devs = lowestIdle(n, req.Devices())
		}
		if !fits(n, req, devs, share) {
			panic(fmt.Sprintf("schedtest: workload %s: pod %d does not fit on node %s devices %v", wl.ID, pod, n.Name, devs))
		}
		s.Place(wl, pod, n, devs, share)
	}
	if wl.PlacedPods() > 0 {
		wl.Phase = cluster.Running
		wl.FirstRunning = now
		s.StampBelowMinimum(now)
	}
}

func lowestIdle(n *cluster.Node, k int) []int {
	var out []int
	for i := range n.Devices {
		if len(out) < k && n.Devices[i].Idle() {
			out = append(out, i)
		}
	}
	return out
}

func fullestFit(n *cluster.Node, pod cluster.PodRequest) []int {
	best := -1
	for i := range n.Devices {
		d := &n.Devices[i]
		if d.Whole || d.Free() < pod.ShareOn(d.Memory) {
			continue
		}
		if best < 0 || d.Used > n.Devices[best].Used {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	return []int{best}
}

// fits checks a hand-made placement: a bad one would corrupt the state.
func fits(n *cluster.Node, pod cluster.PodRequest, devs []int, share int64) bool {
	free := n.Free()
	if !n.Ready || free.CPU < pod.CPU || free.Memory < pod.Memory {
		return false
	}
	if pod.GPU == 0 && pod.GPUMemory == 0 {
		return true
	}
	want := pod.Devices()
	if pod.Shares() {
		want = 1
	}
	if len(devs) != want {
		return false
	}
	for _, d := range devs {
		if d < 0 || d >= len(n.Devices) {
			return false
		}
		dev := &n.Devices[d]
		if share == cluster.FullDevice && !dev.Idle() || share < cluster.FullDevice && (dev.Whole || dev.Free() < share) {
			return false
		}
	}
	return true
}
