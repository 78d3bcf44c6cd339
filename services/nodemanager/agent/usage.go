package agent

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/services/nodemanager"
)

// usageLabels name one pod, as the GPU series do (pkg/gpumetrics).
var usageLabels = []string{"node", "project", "workload", "pod"}

var (
	podCPUDesc = prometheus.NewDesc("runway_pod_cpu_seconds_total",
		"CPU time used by a running pod's processes (its cgroup's cpu.stat, else its processes').", usageLabels, nil)
	podMemoryDesc = prometheus.NewDesc("runway_pod_memory_bytes",
		"Memory held by a running pod's processes (its cgroup's memory.current, else their resident sets).", usageLabels, nil)
)

// PodUsage is a collector of the CPU time and memory of the running pods
// of every agent in a process (Config.Usage), read when gathered: nothing
// is sampled between scrapes.
type PodUsage struct {
	mu   sync.Mutex
	pods map[runner.Pod]usedPod
}

type usedPod struct {
	node   string
	b      nodemanager.Binding
	runner runner.Runner
}

// NewPodUsage returns an empty collector, to be registered once.
func NewPodUsage() *PodUsage { return &PodUsage{pods: map[runner.Pod]usedPod{}} }

func (u *PodUsage) add(node string, b nodemanager.Binding, r runner.Runner, p runner.Pod) {
	u.mu.Lock()
	u.pods[p] = usedPod{node: node, b: b, runner: r}
	u.mu.Unlock()
}

func (u *PodUsage) remove(p runner.Pod) {
	u.mu.Lock()
	delete(u.pods, p)
	u.mu.Unlock()
}

// Describe sends the two families' descriptions.
func (u *PodUsage) Describe(ch chan<- *prometheus.Desc) {
	ch <- podCPUDesc
	ch <- podMemoryDesc
}

// Collect reads each pod's usage, one runner (at most one walk of /proc)
// at a time.
func (u *PodUsage) Collect(ch chan<- prometheus.Metric) {
	byRunner := map[runner.Runner][]runner.Pod{}
	pods := map[runner.Pod]usedPod{}
	u.mu.Lock()
	for p, up := range u.pods {
		byRunner[up.runner] = append(byRunner[up.runner], p)
		pods[p] = up
	}
	u.mu.Unlock()
	for r, ps := range byRunner {
		for i, use := range r.Usage(ps...) {
			up := pods[ps[i]]
			v := []string{up.node, up.b.Project, up.b.Workload, strconv.Itoa(up.b.Pod)}
			ch <- prometheus.MustNewConstMetric(podCPUDesc, prometheus.CounterValue, use.CPU.Seconds(), v...)
			ch <- prometheus.MustNewConstMetric(podMemoryDesc, prometheus.GaugeValue, float64(use.MemoryBytes), v...)
		}
	}
}
