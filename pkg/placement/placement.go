package placement

import (
	"fmt"
	"strings"

	"github.com/runwayhq/runway/pkg/cluster"
)

// Strategy ranks feasible nodes.
type Strategy int

// Strategies (SCHEDULING.md §5).
const (
	Binpack Strategy = iota
	Spread
)

// ParseStrategy reads "binpack" (or "") and "spread".
func ParseStrategy(s string) (Strategy, error) {
	switch s {
	case "", "binpack":
		return Binpack, nil
	case "spread":
		return Spread, nil
	}
	return Binpack, fmt.Errorf("unknown placement %q (want binpack or spread)", s)
}

// MissKind says why pods did not fit.
type MissKind int

// The kinds of misses.
const (
	NoReadyNode    MissKind = iota + 1 // the pool has no Ready node
	NoNodeOfType                       // no Ready node of the workload's node type
	NoRoom                             // no node has room for a pod
	NotAllTogether                     // some of the k pods fit, not all at once
	NoNodeOfRole                       // no Ready node of the role the workload needs (eligible.go)
)

// Miss is why Place placed nothing: its kind, the numbers, and a sentence
// with them for people.
type Miss struct {
	Kind MissKind
	// Requested is what the k pods need together; Largest the most that is
	// free on one node (GPU, or CPU for a CPU-only pod); Nodes the Ready
	// nodes (of the workload's type) that could not take a pod.
	Requested, Largest cluster.Resources
	Nodes              int
	Text               string
}

// Place puts the next k unplaced pods of w on nodes of pool p, all or none,
// and returns the pods it placed. On failure s is unchanged, the pods are nil
// and the miss says what did not fit, with numbers.
func Place(s *cluster.State, p *cluster.Pool, w *cluster.Workload, k int, st Strategy) ([]int, Miss) {
	mark := s.Mark()
	pods := make([]int, 0, k)
	for pod := range w.Placed {
		if len(pods) == k {
			break
		}
		if w.Placed[pod].Node != nil {
			continue
		}
		n, devs, share := choose(s, p, w, w.PodAt(pod), st)
		if n == nil {
			s.Rollback(mark)
			return nil, failure(s, p, w, k, len(pods))
		}
		s.Place(w, pod, n, devs, share)
		pods = append(pods, pod)
	}
	return pods, Miss{}
}

// choose finds the best node and devices for one pod of w asking for req,
// or nil.
func choose(s *cluster.State, p *cluster.Pool, w *cluster.Workload, req cluster.PodRequest, st Strategy) (*cluster.Node, []int, int64) {
	switch {
	case req.Shares():
		return chooseShared(s, p, w, req, st)
	case req.GPU > 0:
		g := req.Devices()
		var best *cluster.Node
		visit := func(n *cluster.Node) bool {
			if fitsHost(s, n, w, req) && n.IdleDevices() >= g {
				best = n
				return false
			}
			return true
		}
		walk(p, int64(g)*cluster.FullDevice, st, visit)
		if best == nil {
			return nil, nil, 0
		}
		return best, idleDevices(best, g), cluster.FullDevice
	default:
		n := chooseCPUOnly(s, p, w, req, st)
		return n, nil, 0
	}
}

func walk(p *cluster.Pool, min int64, st Strategy, fn func(*cluster.Node) bool) {
	if st == Spread {
		p.DescendFree(min, fn)
	} else {
		p.AscendFree(min, fn)
	}
}

// fitsHost checks everything but GPUs: Eligible, cpu and memory.
func fitsHost(s *cluster.State, n *cluster.Node, w *cluster.Workload, req cluster.PodRequest) bool {
	if !Eligible(s, n, w) {
		return false
	}
	free := n.Free()
	return free.CPU >= req.CPU && free.Memory >= req.Memory
}

func idleDevices(n *cluster.Node, g int) []int {
	out := make([]int, 0, g)
	for i := range n.Devices {
		if n.Devices[i].Idle() {
			out = append(out, i)
			if len(out) == g {
				break
			}
		}
	}
	return out
}

// chooseShared places a fraction. Under binpack it goes first to a node that
// already has a shared device it fits on, then anywhere; under spread to the
// node with the most free GPU (SCHEDULING.md §5 names the shared-device
// preference under binpack only).
func chooseShared(s *cluster.State, p *cluster.Pool, w *cluster.Workload, req cluster.PodRequest, st Strategy) (*cluster.Node, []int, int64) {
	min := int64(1)
	if req.GPUMemory == 0 {
		min = req.GPU
	}
	passes := []bool{true, false}
	if st == Spread {
		passes = []bool{false}
	}
	for _, sharedOnly := range passes {
		var best *cluster.Node
		dev := -1
		walk(p, min, st, func(n *cluster.Node) bool {
			if !fitsHost(s, n, w, req) {
				return true
			}
			if d := pickDevice(n, req, st, sharedOnly); d >= 0 {
				best, dev = n, d
				return false
			}
			return true
		})
		if best != nil {
			return best, []int{dev}, req.ShareOn(best.Devices[dev].Memory)
		}
	}
	return nil, nil, 0
}

// pickDevice returns the device a share goes to on n, or -1: the fullest
// shared device it fits on (binpack) or the emptiest (spread); with
// sharedOnly false an idle device also qualifies.
func pickDevice(n *cluster.Node, req cluster.PodRequest, st Strategy, sharedOnly bool) int {
	best := -1
	for i := range n.Devices {
		d := &n.Devices[i]
		if d.Whole || (sharedOnly && d.Shared == 0) || d.Free() < req.ShareOn(d.Memory) {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := &n.Devices[best]
		if (st == Binpack && d.Used > b.Used) || (st == Spread && d.Used < b.Used) {
			best = i
		}
	}
	return best
}

func chooseCPUOnly(s *cluster.State, p *cluster.Pool, w *cluster.Workload, req cluster.PodRequest, st Strategy) *cluster.Node {
	var best *cluster.Node
	for _, n := range p.Nodes {
		if !n.Ready || n.Cordoned || !fitsHost(s, n, w, req) {
			continue
		}
		if best == nil {
			best = n
			continue
		}
		f, b := n.Free().CPU, best.Free().CPU
		if (st == Binpack && f < b) || (st == Spread && f > b) {
			best = n
		}
	}
	return best
}

// failure explains why pods of w do not fit in p, with numbers, and names
// the pool's unhealthy devices when a GPU pod misses.
func failure(s *cluster.State, p *cluster.Pool, w *cluster.Workload, k, placed int) Miss {
	m := miss(s, p, w, k, placed)
	if p.Unhealthy > 0 && w.Pod.GPU+w.Pod.GPUMemory > 0 {
		m.Text += "; " + unhealthy(p)
	}
	return m
}

// unhealthy names the pool's unhealthy devices (the first three).
func unhealthy(p *cluster.Pool) string {
	var names []string
	for _, n := range p.Nodes {
		for _, d := range n.Devices {
			if n.Ready && d.Unhealthy != "" && len(names) < 3 {
				names = append(names, fmt.Sprintf("%s GPU %d (%s)", n.Name, d.Index, d.Unhealthy))
			}
		}
	}
	if p.Unhealthy > len(names) {
		names = append(names, fmt.Sprintf("%d more", p.Unhealthy-len(names)))
	}
	return "unhealthy, not offered: " + strings.Join(names, ", ")
}

func miss(s *cluster.State, p *cluster.Pool, w *cluster.Workload, k, placed int) Miss {
	need := cluster.Resources{GPU: w.Pod.GPU, CPU: w.Pod.CPU, Memory: w.Pod.Memory}
	need = cluster.Resources{GPU: need.GPU * int64(k), CPU: need.CPU * int64(k), Memory: need.Memory * int64(k)}
	what := podNeed(w.Pod)
	var fit string
	room := NoRoom
	if w.Lead != nil && w.Placed[0].Node == nil {
		// A distributed training's master is among the pods: it has its own need.
		l := *w.Lead
		need = need.Add(cluster.Resources{GPU: l.GPU - w.Pod.GPU, CPU: l.CPU - w.Pod.CPU, Memory: l.Memory - w.Pod.Memory})
		fit = fmt.Sprintf("needs a master of %s and %d pods of %s; %d fit", podNeed(l), k-1, what, placed)
		if placed > 0 {
			room = NotAllTogether
		}
	} else if k > 1 {
		fit = fmt.Sprintf("needs %d pods of %s; %d fit", k, what, placed)
		if placed > 0 {
			room = NotAllTogether
		}
	} else {
		fit = "needs " + what
	}
	role := roleText(s, w)
	if w.NodeType == "" && role == "" && w.Pod.GPU+w.Pod.GPUMemory > 0 && w.Pod.CPU+w.Pod.Memory == 0 && p.ReadyNodes() > 0 {
		// The common case without a scan: the free index knows the largest block.
		return Miss{Kind: room, Requested: need, Largest: cluster.Resources{GPU: p.MaxFree()}, Nodes: p.ReadyNodes(),
			Text: fmt.Sprintf("%s; the largest free block is %s", fit, cluster.Quantity(cluster.GPU, p.MaxFree()))}
	}
	ready, typed := 0, 0
	var maxGPU, maxCPU, maxMemory int64
	var largest *cluster.Node // the biggest node of the type, by its total
	fitsOne := false          // some node could take one pod were it empty
	for _, n := range p.Nodes {
		if !n.Ready || n.Cordoned {
			continue
		}
		ready++
		if !Eligible(s, n, w) {
			continue
		}
		typed++
		free := n.Free()
		maxGPU = max(maxGPU, free.GPU)
		maxCPU = max(maxCPU, free.CPU)
		maxMemory = max(maxMemory, free.Memory)
		fitsOne = fitsOne || holds(n.Capacity, w.Pod)
		if largest == nil || bigger(n.Capacity, largest.Capacity) {
			largest = n
		}
	}
	m := Miss{Requested: need, Nodes: typed}
	switch {
	case ready == 0:
		m.Kind, m.Text = NoReadyNode, fmt.Sprintf("%s; node pool %s has no Ready node", fit, p.Name)
	case typed == 0 && w.NodeType != "":
		m.Kind, m.Nodes, m.Text = NoNodeOfType, ready, fmt.Sprintf("%s; node pool %s has no Ready %snode of type %s", fit, p.Name, role, w.NodeType)
	case typed == 0:
		m.Kind, m.Nodes, m.Text = NoNodeOfRole, ready, fmt.Sprintf("%s; node pool %s has no Ready %snode", fit, p.Name, role)
	case w.Pod.GPU > 0 || w.Pod.GPUMemory > 0:
		m.Kind, m.Largest = room, cluster.Resources{GPU: maxGPU}
		on := ""
		if role != "" {
			on = " on a " + role + "node"
		}
		m.Text = fmt.Sprintf("%s; the largest free block%s is %s", fit, on, cluster.Quantity(cluster.GPU, maxGPU)) + hostFree(w.Pod, maxCPU, maxMemory)
	default:
		m.Kind, m.Largest = room, cluster.Resources{CPU: maxCPU}
		m.Text = fmt.Sprintf("%s; the most free on one %snode is %s", fit, role, cluster.Quantity(cluster.CPU, maxCPU)) + hostFree(cluster.PodRequest{Memory: w.Pod.Memory}, 0, maxMemory)
	}
	if largest != nil && !fitsOne {
		m.Text += "; " + neverFits(p, w.Pod, largest)
	}
	return m
}

// holds says whether a node of total c could take one pod of r were it
// empty (GPU memory needs some GPU of the node; its size is not checked).
func holds(c cluster.Resources, r cluster.PodRequest) bool {
	gpu := r.GPU
	if r.GPUMemory > 0 {
		gpu = max(gpu, 1)
	}
	return c.GPU >= gpu && c.CPU >= r.CPU && c.Memory >= r.Memory
}

// bigger orders nodes by their total: GPUs, then CPU, then memory.
func bigger(a, b cluster.Resources) bool {
	if a.GPU != b.GPU {
		return a.GPU > b.GPU
	}
	if a.CPU != b.CPU {
		return a.CPU > b.CPU
	}
	return a.Memory > b.Memory
}

// hostFree names the most free CPU and memory on one node, for the ones
// the pod asks for.
func hostFree(r cluster.PodRequest, cpu, memory int64) string {
	var parts []string
	if r.CPU > 0 {
		parts = append(parts, cluster.Quantity(cluster.CPU, cpu)+" of CPU")
	}
	if r.Memory > 0 {
		parts = append(parts, cluster.FormatAmount(cluster.Memory, memory)+" of memory")
	}
	if len(parts) == 0 {
		return ""
	}
	return "; the most free on one node is " + strings.Join(parts, " and ")
}

// neverFits says, in plain words, that no node of the pool is big enough
// for one pod, which resources fall short, and the largest node's total
// and free CPU, memory and GPUs.
func neverFits(p *cluster.Pool, r cluster.PodRequest, n *cluster.Node) string {
	c, f := n.Capacity, n.Free()
	var short []string
	if r.CPU > c.CPU {
		short = append(short, fmt.Sprintf("%s of CPU", cluster.Quantity(cluster.CPU, r.CPU)))
	}
	if r.Memory > c.Memory {
		short = append(short, fmt.Sprintf("%s of memory", cluster.FormatAmount(cluster.Memory, r.Memory)))
	}
	if !holds(cluster.Resources{GPU: c.GPU, CPU: r.CPU, Memory: r.Memory}, r) {
		short = append(short, podNeed(cluster.PodRequest{GPU: r.GPU, GPUMemory: r.GPUMemory}))
	}
	all := func(x cluster.Resources) string {
		return fmt.Sprintf("%s, %s of memory and %s", cluster.Quantity(cluster.CPU, x.CPU), cluster.FormatAmount(cluster.Memory, x.Memory), cluster.Quantity(cluster.GPU, x.GPU))
	}
	return fmt.Sprintf("it can never fit in node pool %s: a pod needs %s, more than any node has; the largest node, %s, has %s in all (%s free)",
		p.Name, strings.Join(short, " and "), n.Name, all(c), all(f))
}

func podNeed(r cluster.PodRequest) string {
	switch {
	case r.GPUMemory > 0:
		return fmt.Sprintf("%s of GPU memory on one device", cluster.FormatAmount(cluster.Memory, r.GPUMemory))
	case r.Shares():
		return fmt.Sprintf("%s of one device", cluster.Quantity(cluster.GPU, r.GPU))
	case r.GPU > 0:
		return fmt.Sprintf("%s on one node", cluster.Quantity(cluster.GPU, r.GPU))
	default:
		return fmt.Sprintf("%s on one node", cluster.Quantity(cluster.CPU, r.CPU))
	}
}
