package scheduling

import (
	"time"

	"github.com/runwayhq/runway/pkg/cluster"

	"github.com/runwayhq/runway/pkg/placement"
)

// Config tunes a cycle.
type Config struct {
	Placement placement.Strategy
	// Now is the cycle's time, for the gang-minimum timeout.
	Now time.Duration
	// GangTimeout is how long a workload may hold fewer pods than its minimum
	// before it is evicted whole (SCHEDULING.md §4: 60 s).
	GangTimeout time.Duration
	// SearchBound caps the victim sets examined for one workload before the
	// search falls back to a greedy set pruned to a minimal one.
	SearchBound int
	// Observe, when set, is called as each step takes up a workload (fault
	// injection: a panic in it is contained like one of the step's own).
	Observe func(step Step, workload string)
}

// DefaultConfig is the platform's configuration.
func DefaultConfig() Config {
	return Config{Placement: placement.Binpack, GangTimeout: 60 * time.Second, SearchBound: 2000}
}

// Rule names why an eviction happened.
type Rule string

// Eviction rules.
const (
	RuleReclaim     Rule = "reclaim"      // between projects, to give a project its fair share
	RulePreempt     Rule = "preempt"      // inside a project, for higher priority
	RuleGangMinimum Rule = "gang-minimum" // held fewer pods than its minimum too long
	// RuleConsolidation moves a running workload inside its pool so that a
	// pending one fits (the plan binds it again in the same cycle).
	RuleConsolidation Rule = "consolidation"
)

// Binding puts one pod on a node.
type Binding struct {
	Workload string
	Pod      int
	Node     string
	Devices  []int
	// Share is the milli-GPUs held on each device (1000 for whole devices).
	Share int64
}

// Eviction stops pods of a running workload.
type Eviction struct {
	Workload string
	// Pods lists the pods evicted; nil means the whole workload.
	Pods []int
	Rule Rule
	// For is the workload the eviction makes room for ("" for gang-minimum).
	For    string
	Reason string
}

// Waiting is a workload left with pods to place, and why.
type Waiting struct {
	Workload string
	Reasons  []Reason
}

// Check names the test a waiting workload failed (SCHEDULING.md §3, §5), so
// that clients can branch on it; the text is for people.
type Check int

// The checks, in the order the API's PendingCheck lists them.
const (
	CheckLimit                  Check = iota + 1 // a queue would exceed its limit (or deserved, over-quota off)
	CheckNonPreemptibleDeserved                  // non-preemptible work would exceed deserved
	CheckNodePool                                // the pool has no Ready node
	CheckNodeType                                // no Ready node of the requested type (or node role)
	CheckCapacity                                // no node has room for a pod
	CheckGang                                    // single pods fit, not all of them at once (or evicted for its minimum)
	CheckReclaim                                 // reclaim was not allowed, found no victims, or evicted it
	CheckPreempt                                 // preemption found no victims, or evicted it
)

// Reason is one check a workload failed in a cycle.
type Reason struct {
	Check Check
	// Pool is the node pool the check ran in.
	Pool string
	// Queue is the queue a quota check is about, "projects/{p}" or
	// "departments/{d}"; empty otherwise.
	Queue string
	// Requested is what the check needed; Available what it allowed: the
	// room under a cap for quota and reclaim checks, the largest free block
	// on one node for capacity checks. Zero where the check has no amount.
	Requested, Available cluster.Resources
	// Nodes is how many nodes of the pool failed a node-level check.
	Nodes int
	// Text says it with the numbers, for people.
	Text string
}

// ruleChecks: an evicted workload waits because of the rule that evicted it.
var ruleChecks = map[Rule]Check{RuleReclaim: CheckReclaim, RulePreempt: CheckPreempt, RuleGangMinimum: CheckGang,
	RuleConsolidation: CheckCapacity}

// Texts are the reasons' texts, in order.
func Texts(rs []Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Text
	}
	return out
}

// Plan is a cycle's decisions, in the order they were taken.
type Plan struct {
	Evictions []Eviction
	Bindings  []Binding
	Waiting   []Waiting
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Evictions) == 0 && len(p.Bindings) == 0 }
