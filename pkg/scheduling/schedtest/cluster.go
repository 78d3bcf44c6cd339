package schedtest

import (
	"fmt"
	"time"

	"github.com/runwayhq/runway/pkg/cluster"
)

// Cluster builds a *cluster.State step by step. Every method applies at once,
// in the order called, so declaration order (queue creation order, submission
// order) is the order of the calls.
type Cluster struct {
	s    *cluster.State
	pool string // the pool Node adds to
	now  time.Duration
}

// NewCluster starts an empty cluster with the pool "default".
func NewCluster() *Cluster { return &Cluster{s: cluster.New(), pool: "default"} }

// State returns the state built so far.
func (c *Cluster) State() *cluster.State { return c.s }

// At sets the time that running workloads are stamped with from now on
// (FirstRunning, and BelowMinSince for one placed below its gang minimum).
func (c *Cluster) At(now time.Duration) *Cluster {
	c.now = now
	return c
}

// Pool declares a node pool; the nodes declared after it go into it.
func (c *Cluster) Pool(name string) *Cluster {
	c.s.AddPool(name)
	c.pool = name
	return c
}

// NodeOption adjusts a node. Defaults (those of a scenario file): 80 GiB per
// device, 64 cores, 512 GiB of memory, Ready, no type.
type NodeOption func(*cluster.NodeSpec)

// Type labels the node with a node type (run.ai/type).
func Type(t string) NodeOption {
	return func(n *cluster.NodeSpec) { n.Labels = map[string]string{cluster.NodeTypeLabel: t} }
}

// Roles gives the node roles (system, gpu-worker, cpu-worker).
func Roles(r cluster.NodeRoles) NodeOption {
	return func(n *cluster.NodeSpec) { n.Roles = r }
}

// DeviceMemoryGiB sets the memory of each of the node's devices.
func DeviceMemoryGiB(g float64) NodeOption {
	return func(n *cluster.NodeSpec) { n.GPUMemory = cluster.BytesFromGiB(g) }
}

// Cores sets the node's CPU.
func Cores(cores float64) NodeOption {
	return func(n *cluster.NodeSpec) { n.CPU = cluster.MilliFromFloat(cores) }
}

// RAMGiB sets the node's memory.
func RAMGiB(g float64) NodeOption {
	return func(n *cluster.NodeSpec) { n.Memory = cluster.BytesFromGiB(g) }
}

// Down declares the node not Ready.
func Down() NodeOption { return func(n *cluster.NodeSpec) { n.NotReady = true } }

// NodeSpec is the cluster.NodeSpec Node would add, defaults and options
// applied.
func NodeSpec(name, pool string, gpus int, opts ...NodeOption) cluster.NodeSpec {
	n := cluster.NodeSpec{Name: name, Pool: pool, GPUs: gpus,
		GPUMemory: cluster.BytesFromGiB(80), CPU: 64_000, Memory: cluster.BytesFromGiB(512)}
	for _, o := range opts {
		o(&n)
	}
	return n
}

// Node adds a node with that many GPUs to the pool declared last.
func (c *Cluster) Node(name string, gpus int, opts ...NodeOption) *Cluster {
	must(c.s.AddNode(NodeSpec(name, c.pool, gpus, opts...)))
	return c
}

// QuotaOption sets part of a queue's quota. Options apply in order to the
// pool "default" until InPool names another.
type QuotaOption func(*quotas)

// quotas is a queue's quota per pool while options apply.
type quotas struct {
	pool   string
	byPool map[string]cluster.Quota
	def    cluster.Quota
}

func (q *quotas) update(fn func(*cluster.Quota)) {
	x, ok := q.byPool[q.pool]
	if !ok {
		x = q.def
	}
	fn(&x)
	q.byPool[q.pool] = x
}

// InPool makes the options after it apply to the quota in pool.
func InPool(pool string) QuotaOption { return func(q *quotas) { q.pool = pool } }

// Deserved sets the deserved GPUs (-1: unlimited).
func Deserved(gpus float64) QuotaOption {
	return func(q *quotas) { q.update(func(x *cluster.Quota) { x.Deserved.GPU = milliOrUnlimited(gpus) }) }
}

// Limit sets the GPU limit (-1: none).
func Limit(gpus float64) QuotaOption {
	return func(q *quotas) { q.update(func(x *cluster.Quota) { x.Limit.GPU = milliOrUnlimited(gpus) }) }
}

// DeservedCPU sets the deserved cores (-1: unlimited, the default).
func DeservedCPU(cores float64) QuotaOption {
	return func(q *quotas) { q.update(func(x *cluster.Quota) { x.Deserved.CPU = milliOrUnlimited(cores) }) }
}

// LimitCPU sets the CPU limit in cores (-1: none).
func LimitCPU(cores float64) QuotaOption {
	return func(q *quotas) { q.update(func(x *cluster.Quota) { x.Limit.CPU = milliOrUnlimited(cores) }) }
}

// Weight sets the over-quota weight of every resource.
func Weight(w float64) QuotaOption {
	return func(q *quotas) { q.update(func(x *cluster.Quota) { x.Weight = cluster.SameWeights(w) }) }
}

// WeightOf sets the over-quota weight of one resource.
func WeightOf(r cluster.Resource, w float64) QuotaOption {
	return func(q *quotas) { q.update(func(x *cluster.Quota) { x.Weight[r] = w }) }
}

// NoOverQuota turns over-quota off: the queue never holds more than deserved.
func NoOverQuota() QuotaOption {
	return func(q *quotas) { q.update(func(x *cluster.Quota) { x.OverQuota = false }) }
}

// Quotas resolves options into the per-pool map AddProject and AddDepartment
// take; pools not named keep the default quota.
func Quotas(opts ...QuotaOption) map[string]cluster.Quota {
	q := &quotas{pool: "default", byPool: map[string]cluster.Quota{}, def: cluster.DefaultQuota()}
	for _, o := range opts {
		o(q)
	}
	return q.byPool
}

// Department declares a department deserving gpu GPUs in the pool "default"
// (options may change that and set the rest).
func (c *Cluster) Department(name string, gpu float64, opts ...QuotaOption) *Cluster {
	must(c.s.AddDepartment(name, Quotas(append([]QuotaOption{Deserved(gpu)}, opts...)...)))
	return c
}

// Project declares a project under a department ("" for the implicit
// default department).
func (c *Cluster) Project(name, department string, opts ...QuotaOption) *Cluster {
	must(c.s.AddProject(name, department, Quotas(opts...)))
	return c
}

// Workload submits workloads in order and places the pods given nodes.
func (c *Cluster) Workload(ws ...*Workload) *Cluster {
	for _, w := range ws {
		w.build(c.s, c.now)
	}
	return c
}

func milliOrUnlimited(f float64) int64 {
	if f < 0 {
		return cluster.Unlimited
	}
	return cluster.MilliFromFloat(f)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("schedtest: %v", err))
	}
	return v
}
