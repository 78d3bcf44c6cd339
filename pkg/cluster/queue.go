package cluster

import "github.com/runwayhq/runway/pkg/fairshare"

// QueueKind tells a department from a project.
type QueueKind int

// Queue kinds. The root is implicit: its children are the departments.
const (
	Department QueueKind = iota
	Project
)

func (k QueueKind) String() string {
	if k == Department {
		return "department"
	}
	return "project"
}

// DefaultDepartment holds projects that name no department.
const DefaultDepartment = "default"

// Quota is a queue's quota in one pool (SCHEDULING.md §1). Deserved and Limit
// use Unlimited (-1) per resource.
type Quota struct {
	Deserved  Resources
	Limit     Resources
	Weight    Weights // over-quota weight per resource
	OverQuota bool
}

// Weights are over-quota weights, one per resource: each divides what is
// left of its own resource (SCHEDULING.md §2).
type Weights [NumResources]float64

// SameWeights is w for every resource.
func SameWeights(w float64) Weights { return Weights{w, w, w} }

// Get returns the weight for r.
func (w Weights) Get(r Resource) float64 { return w[r] }

// DefaultQuota is what a queue gets in a pool its spec does not mention: no
// guaranteed GPUs, unlimited cpu and memory, weight 1, no limit, over-quota on.
func DefaultQuota() Quota {
	return Quota{
		Deserved:  Resources{GPU: 0, CPU: Unlimited, Memory: Unlimited},
		Limit:     Resources{GPU: Unlimited, CPU: Unlimited, Memory: Unlimited},
		Weight:    SameWeights(1),
		OverQuota: true,
	}
}

// UnlimitedQuota is the implicit default department's quota.
func UnlimitedQuota() Quota {
	q := DefaultQuota()
	q.Deserved.GPU = Unlimited
	return q
}

// EffectiveLimit is the hard cap: the limit, or deserved when over-quota is off.
func (q Quota) EffectiveLimit(r Resource) int64 {
	l := q.Limit.Get(r)
	if !q.OverQuota {
		d := q.Deserved.Get(r)
		if d != Unlimited && (l == Unlimited || d < l) {
			return d
		}
	}
	return l
}

// Decayed is a queue's past usage in one pool, per resource: what it held,
// integrated over time with each moment weighted by 0.5^(age / half-life)
// (fairshare.Accrue), in milli-units (bytes for memory) times seconds.
type Decayed [NumResources]float64

// Usage is a queue's live accounting in one pool.
type Usage struct {
	Allocated      Resources // held by its placed pods
	NonPreemptible Resources // the part of Allocated held by non-preemptible workloads
	Pending        Resources // asked for by pods not yet placed (home pool only)
}

// Requested is what the queue holds plus what its pending pods ask for.
func (u Usage) Requested() Resources { return u.Allocated.Add(u.Pending) }

// Queue is a department or a project.
type Queue struct {
	Name     string
	Kind     QueueKind
	Order    int // creation order
	Parent   *Queue
	Children []*Queue // creation order

	Quotas    []Quota     // per pool index
	Usage     []Usage     // per pool index
	FairShare []Resources // per pool index, set by the scheduler each cycle

	// Time-based fair share, per pool index, in pools that have it on
	// (Pool.TimeBased): the decayed usage the scheduler accrues from what
	// the queue held, and the weights the last cycle derived from it.
	Decayed  []Decayed
	Adjusted [][NumResources]fairshare.Adjustment

	// projects only
	waiting map[*Workload]struct{}
	running map[*Workload]struct{}
}

// Waiting returns the project's workloads that have pods to place (unordered).
func (q *Queue) Waiting() map[*Workload]struct{} { return q.waiting }

// Running returns the project's workloads that hold pods (unordered).
func (q *Queue) Running() map[*Workload]struct{} { return q.running }

// Level walks q and its ancestors up to (not including) the root.
func (q *Queue) Level(fn func(*Queue)) {
	for x := q; x != nil; x = x.Parent {
		fn(x)
	}
}
