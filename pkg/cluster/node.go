package cluster

import (
	"github.com/google/btree"

	"github.com/runwayhq/runway/pkg/fairshare"
)

// FullDevice is a whole device in milli-GPUs.
const FullDevice int64 = 1000

// Device is one GPU of a node and what is held of it.
type Device struct {
	Index  int
	Memory int64 // bytes
	Used   int64 // milli-GPUs held
	Whole  bool  // held whole by one pod; fractions may not join it
	Shared int   // pods holding a fraction of it
	// Unhealthy says why the device may not be used (an XID error); ""
	// when healthy. Nothing new is placed on an unhealthy device.
	Unhealthy string
}

// Free is what is left of the device in milli-GPUs (none when unhealthy).
func (d *Device) Free() int64 {
	if d.Unhealthy != "" {
		return 0
	}
	return FullDevice - d.Used
}

// Idle reports whether nothing holds the device and it may take a pod.
func (d *Device) Idle() bool { return d.Used == 0 && d.Unhealthy == "" }

// Node is a machine of one pool.
type Node struct {
	Name   string
	Pool   *Pool
	Labels map[string]string
	Roles  NodeRoles
	Ready  bool
	// Cordoned: the node keeps its pods but takes nothing new (drained
	// without eviction, or its agent lost within the grace period).
	Cordoned bool
	Capacity Resources // GPU = healthy devices × 1000
	Used     Resources
	Devices  []Device
	// Pods lists what runs here, in placement order.
	Pods []PodRef

	rank int // position in Pool.Nodes (name order), the index tie-break
}

// PodRef names one pod of a workload.
type PodRef struct {
	Workload *Workload
	Pod      int
}

// Free is what is left of the node.
func (n *Node) Free() Resources { return n.Capacity.Sub(n.Used) }

// IdleDevices counts devices nothing holds.
func (n *Node) IdleDevices() int {
	k := 0
	for i := range n.Devices {
		if n.Devices[i].Idle() {
			k++
		}
	}
	return k
}

// Type is the node's run.ai/type label, the node type workloads may ask for.
func (n *Node) Type() string { return n.Labels[NodeTypeLabel] }

// NodeTypeLabel is the label that carries a node's type.
const NodeTypeLabel = "run.ai/type"

// Pool is a node pool: scheduled on its own, with its own queue tree usage.
type Pool struct {
	Name  string
	Index int
	Nodes []*Node // name order
	// Total is the sum of the resources of the pool's Ready nodes.
	Total Resources
	// Used is what pods hold on the pool's Ready nodes.
	Used Resources
	// MinDeviceMemory is the smallest device memory among Ready nodes: a pending
	// GPU-memory request counts memory / this (SCHEDULING.md §1).
	MinDeviceMemory int64
	// TimeBased is the pool's time-based fair-share setting (off when zero).
	TimeBased fairshare.TimeBased
	// Unhealthy counts the unhealthy devices of Ready nodes.
	Unhealthy int

	byFree *btree.BTreeG[freeKey]
}

// freeKey orders a pool's Ready nodes by free GPUs, then name: binpack walks it
// upwards from the request, spread downwards.
type freeKey struct {
	free int64
	rank int
	node *Node
}

func lessFree(a, b freeKey) bool {
	if a.free != b.free {
		return a.free < b.free
	}
	return a.rank < b.rank
}

// AscendFree calls fn for Ready nodes with at least min free milli-GPUs, least
// free first (ties: name), until fn returns false.
func (p *Pool) AscendFree(min int64, fn func(*Node) bool) {
	p.byFree.AscendGreaterOrEqual(freeKey{free: min, rank: -1}, func(k freeKey) bool { return fn(k.node) })
}

// DescendFree calls fn for Ready nodes with at least min free milli-GPUs, most
// free first (ties: name), until fn returns false.
func (p *Pool) DescendFree(min int64, fn func(*Node) bool) {
	var keys []freeKey
	p.byFree.Descend(func(k freeKey) bool {
		if k.free < min {
			return false
		}
		keys = append(keys, k)
		return true
	})
	// Within one free level the btree descends by name too; spread wants name
	// order as its tie-break, so reverse each run of equal free.
	for i := 0; i < len(keys); {
		j := i
		for j < len(keys) && keys[j].free == keys[i].free {
			j++
		}
		for a, b := i, j-1; a < b; a, b = a+1, b-1 {
			keys[a], keys[b] = keys[b], keys[a]
		}
		i = j
	}
	for _, k := range keys {
		if !fn(k.node) {
			return
		}
	}
}

// ReadyNodes counts the pool's Ready nodes that take new pods.
func (p *Pool) ReadyNodes() int { return p.byFree.Len() }

// MaxFree is the most free milli-GPUs on one Ready node of the pool.
func (p *Pool) MaxFree() int64 {
	k, ok := p.byFree.Max()
	if !ok {
		return 0
	}
	return k.free
}

func (p *Pool) indexNode(n *Node) {
	if n.Ready && !n.Cordoned {
		p.byFree.ReplaceOrInsert(freeKey{free: n.Capacity.GPU - n.Used.GPU, rank: n.rank, node: n})
	}
}

func (p *Pool) unindexNode(n *Node) {
	if n.Ready && !n.Cordoned {
		p.byFree.Delete(freeKey{free: n.Capacity.GPU - n.Used.GPU, rank: n.rank})
	}
}

// Free is what the pool's Ready nodes have left in all.
func (p *Pool) Free() Resources { return p.Total.Sub(p.Used) }

func (p *Pool) recompute() {
	p.Total = Resources{}
	p.Used = Resources{}
	p.MinDeviceMemory = 0
	p.Unhealthy = 0
	for _, n := range p.Nodes {
		if !n.Ready {
			continue
		}
		p.Total = p.Total.Add(n.Capacity)
		p.Used = p.Used.Add(n.Used)
		for _, d := range n.Devices {
			if d.Unhealthy != "" {
				p.Unhealthy++
			}
			if p.MinDeviceMemory == 0 || d.Memory < p.MinDeviceMemory {
				p.MinDeviceMemory = d.Memory
			}
		}
	}
}
