package scheduling

import (
	"time"

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
	Reasons  []string
}

// Plan is a cycle's decisions, in the order they were taken.
type Plan struct {
	Evictions []Eviction
	Bindings  []Binding
	Waiting   []Waiting
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Evictions) == 0 && len(p.Bindings) == 0 }
