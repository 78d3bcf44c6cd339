package scenario

import (
	"math"
	"time"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// Output is the JSON document `runway sim run` prints (FORMAT.md "Output").
// Maps marshal with sorted keys, so the same run prints the same bytes.
type Output struct {
	Scenario     string       `json:"scenario"`
	Snapshots    []Snapshot   `json:"snapshots"`
	Expectations Expectations `json:"expectations"`
	Metrics      Metrics      `json:"metrics"`
}

// Snapshot is the state recorded by a `snapshot` action.
type Snapshot struct {
	Name      string                   `json:"name"`
	Time      string                   `json:"time"`
	Workloads map[string]WorkloadState `json:"workloads"`
	Queues    map[string]QueueState    `json:"queues"`
	Cluster   ClusterState             `json:"cluster"`
}

// WorkloadState is one workload in a snapshot.
type WorkloadState struct {
	Status      string   `json:"status"`
	Project     string   `json:"project"`
	Pods        int      `json:"pods"`
	RunningPods int      `json:"runningPods"`
	GPU         float64  `json:"gpu"`
	Nodes       []string `json:"nodes"`
	Preemptions int      `json:"preemptions"`
}

// QueueState is one department or project in a snapshot.
type QueueState struct {
	Kind       string               `json:"kind"`
	Department string               `json:"department,omitempty"`
	Pools      map[string]PoolState `json:"pools"`
}

// PoolState is a queue's numbers in one pool, in GPUs.
type PoolState struct {
	Deserved  float64 `json:"deserved"`
	FairShare float64 `json:"fairShare"`
	Allocated float64 `json:"allocated"`
	Requested float64 `json:"requested"`
}

// ClusterState counts GPUs of Ready nodes and those allocated.
type ClusterState struct {
	GPUs          float64 `json:"gpus"`
	AllocatedGPUs float64 `json:"allocatedGpus"`
}

// Expectations counts the expect checks.
type Expectations struct {
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// Metrics covers the whole run.
type Metrics struct {
	GPUUtilization  float64 `json:"gpuUtilization"`
	MeanWaitSeconds float64 `json:"meanWaitSeconds"`
	Preemptions     int     `json:"preemptions"`
}

func gpus(milli int64) float64 { return float64(milli) / 1000 }

func (r *runner) snapshot(name string) Snapshot {
	scheduling.ComputeFairShares(r.s)
	snap := Snapshot{
		Name: name, Time: FormatClock(r.now),
		Workloads: map[string]WorkloadState{}, Queues: map[string]QueueState{},
	}
	for _, w := range r.s.Workloads() {
		snap.Workloads[w.ID] = workloadState(w)
	}
	for _, d := range r.s.Departments {
		snap.Queues[d.Name] = r.queueState(d)
		for _, p := range d.Children {
			snap.Queues[p.Name] = r.queueState(p)
		}
	}
	snap.Cluster = r.clusterState()
	return snap
}

func workloadState(w *cluster.Workload) WorkloadState {
	nodes := w.Nodes()
	if nodes == nil {
		nodes = []string{}
	}
	return WorkloadState{
		Status: w.Phase.String(), Project: w.Project.Name, Pods: w.Pods, RunningPods: w.PlacedPods(),
		GPU: gpus(w.Held().GPU), Nodes: nodes, Preemptions: w.Preemptions,
	}
}

func (r *runner) queueState(q *cluster.Queue) QueueState {
	qs := QueueState{Kind: q.Kind.String(), Pools: map[string]PoolState{}}
	if q.Kind == cluster.Project {
		qs.Department = q.Parent.Name
	}
	for _, p := range r.s.Pools {
		d := q.Quotas[p.Index].Deserved.GPU
		deserved := gpus(d)
		if d == cluster.Unlimited {
			deserved = -1
		}
		u := q.Usage[p.Index]
		qs.Pools[p.Name] = PoolState{
			Deserved: deserved, FairShare: gpus(q.FairShare[p.Index].GPU),
			Allocated: gpus(u.Allocated.GPU), Requested: gpus(u.Requested().GPU),
		}
	}
	return qs
}

func (r *runner) clusterState() ClusterState {
	var c ClusterState
	for _, p := range r.s.Pools {
		c.GPUs += gpus(p.Total.GPU)
		for _, n := range p.Nodes {
			if n.Ready {
				c.AllocatedGPUs += gpus(n.Used.GPU)
			}
		}
	}
	return c
}

// metrics accumulates the run's metrics block.
type metrics struct {
	allocated   float64 // GPU-seconds allocated
	capacity    float64 // GPU-seconds of Ready GPUs
	waitSum     time.Duration
	starts      int
	preemptions int
	submitted   int
}

func (m *metrics) integrate(s *cluster.State, dt time.Duration) {
	sec := dt.Seconds()
	for _, p := range s.Pools {
		m.capacity += gpus(p.Total.GPU) * sec
		for _, n := range p.Nodes {
			if n.Ready {
				m.allocated += gpus(n.Used.GPU) * sec
			}
		}
	}
}

func (m *metrics) started(w *cluster.Workload) {
	m.starts++
	m.waitSum += w.FirstRunning - w.Submitted
}

func (m *metrics) result(time.Duration) Metrics {
	var out Metrics
	if m.capacity > 0 {
		out.GPUUtilization = round(m.allocated/m.capacity, 4)
	}
	if m.starts > 0 {
		out.MeanWaitSeconds = round(m.waitSum.Seconds()/float64(m.starts), 2)
	}
	out.Preemptions = m.preemptions
	return out
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
