package scheduler

import (
	"math"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// metrics are the scheduler's own series: what its loop did (counters and
// histograms, updated as it runs) and what its model holds (read from the
// cache at each scrape by modelCollector, so nothing is kept twice).
type metrics struct {
	cycle     *prometheus.HistogramVec
	apply     prometheus.Histogram
	conflicts prometheus.Counter
	bindings  *prometheus.CounterVec
	evictions *prometheus.CounterVec
	leader    prometheus.Gauge
	failover  *prometheus.HistogramVec // failover.go
	// leasesRevoked counts the leases of leaders whose process was seen
	// gone that this replica revoked (failover.go).
	leasesRevoked prometheus.Counter
	// following is 1 while this replica, not leading, holds a health
	// stream to the leader's process: a kill of it is seen at once.
	following prometheus.Gauge

	// What went wrong and was contained.
	invariantFailures prometheus.Counter
	setAside          *prometheus.CounterVec
	planDropped       prometheus.Counter
	modelBehind       prometheus.Counter
	undecodable       *prometheus.CounterVec
}

// Cycle phases, the action label of runway_scheduler_cycle_duration_seconds:
// the pure cycle (fair share, allocate, reclaim, preempt in pkg/scheduling),
// the plan's fenced write, and the wait until the watch reflects it.
const (
	actionSchedule = "schedule"
	actionApply    = "apply"
	actionWait     = "wait"
)

func newMetrics() *metrics {
	return &metrics{
		cycle: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "runway_scheduler_cycle_duration_seconds",
			Help:    "Time the leader spent in each phase of a scheduling cycle (schedule, apply, wait).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"action"}),
		apply: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "runway_scheduler_plan_apply_duration_seconds",
			Help:    "Latency of writing one plan to etcd (its fenced transactions), applied or not.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Name: "runway_scheduler_plan_conflicts_total",
			Help: "Plans dropped because a fence or a binding condition no longer held (redone next cycle)."}),
		bindings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runway_scheduler_bindings_total",
			Help: "Pods bound by applied plans, by the rule that made room (allocate, reclaim, preempt)."}, []string{"rule"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runway_scheduler_evictions_total",
			Help: "Workload evictions in applied plans, by rule (reclaim, preempt, gang-minimum)."}, []string{"rule"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "runway_scheduler_leader",
			Help: "1 while this replica leads the scheduler election, else 0."}),
		failover: newFailoverPhases(),
		leasesRevoked: prometheus.NewCounter(prometheus.CounterOpts{Name: "runway_scheduler_leader_leases_revoked_total",
			Help: "Leases of scheduler leaders whose process was seen gone (connection closed, address refused) that this replica revoked."}),
		following: prometheus.NewGauge(prometheus.GaugeOpts{Name: "runway_scheduler_leader_followed",
			Help: "1 while this replica, not leading, holds a health stream to the leader's advertised address (a leader killed is then replaced at once, not after its lease's TTL), else 0."}),
		invariantFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runway_scheduler_invariant_failures_total",
			Help: "Cycles whose plan was dropped because an invariant of the scheduling core failed."}),
		setAside: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runway_scheduler_workloads_set_aside_total",
			Help: "Workloads set aside because a step of a cycle failed on them, by step."}, []string{"step"}),
		planDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runway_scheduler_workload_plans_dropped_total",
			Help: "Workloads whose writes were left out of a plan because they exceed one transaction."}),
		modelBehind: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "runway_scheduler_cycles_skipped_total",
			Help: "Cycles skipped because the model had not yet seen the last plan's writes."}),
		undecodable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "runway_scheduler_undecodable_values_total",
			Help: "Stored values the scheduler's model skipped because they do not decode, by key prefix."}, []string{"prefix"}),
	}
}

// applied counts the bindings and evictions of a plan once it is written.
func (m *metrics) applied(plan scheduling.Plan) {
	rules := map[string]string{}
	for _, e := range plan.Evictions {
		m.evictions.WithLabelValues(string(e.Rule)).Inc()
		if e.For != "" {
			rules[e.For] = string(e.Rule)
		}
	}
	for _, b := range plan.Bindings {
		rule, ok := rules[b.Workload]
		if !ok {
			rule = "allocate"
		}
		m.bindings.WithLabelValues(rule).Inc()
	}
}

// Collectors are the scheduler's collectors, for the process's registry.
func (s *Server) Collectors() []prometheus.Collector {
	m := s.metrics
	for _, r := range []string{"allocate", string(scheduling.RuleReclaim), string(scheduling.RulePreempt)} {
		m.bindings.WithLabelValues(r)
	}
	for _, r := range []scheduling.Rule{scheduling.RuleReclaim, scheduling.RulePreempt, scheduling.RuleGangMinimum} {
		m.evictions.WithLabelValues(string(r))
	}
	return []prometheus.Collector{m.cycle, m.apply, m.conflicts, m.bindings, m.evictions, m.leader, m.failover, m.leasesRevoked, m.following,
		m.invariantFailures, m.setAside, m.planDropped, m.modelBehind, m.undecodable, modelCollector{s}}
}

// desc builds a descriptor of the model's series.
func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	queueLabels    = []string{"node_pool", "queue", "kind", "department"}
	workloadLabels = []string{"project", "workload", "node_pool", "department"}
)

// queueDesc are one queue amount in GPUs, CPU cores and memory bytes.
type queueDesc struct{ gpus, cpu, mem *prometheus.Desc }

func newQueueDesc(what, help string) queueDesc {
	return queueDesc{
		gpus: desc("runway_queue_"+what+"_gpus", help+" GPUs, per node pool (+Inf: unlimited).", queueLabels...),
		cpu:  desc("runway_queue_"+what+"_cpu_cores", help+" CPU cores, per node pool (+Inf: unlimited).", queueLabels...),
		mem:  desc("runway_queue_"+what+"_memory_bytes", help+" memory in bytes, per node pool (+Inf: unlimited).", queueLabels...),
	}
}

var (
	queueDeserved  = newQueueDesc("deserved", "Quota the queue is guaranteed:")
	queueFairShare = newQueueDesc("fair_share", "Fair share the last cycle computed for the queue:")
	queueAllocated = newQueueDesc("allocated", "What the queue's placed pods hold:")
	queueRequested = newQueueDesc("requested", "What the queue holds plus what its pending pods ask for:")
	queueLimit     = newQueueDesc("limit", "The queue's hard cap:")

	pendingDesc = desc("runway_scheduler_pending_workloads",
		"Workloads the last cycle left waiting, by the check that holds them (one workload may count under several checks).",
		"node_pool", "queue", "check")
	workloadsDesc = desc("runway_workloads", "Workloads the scheduler knows, by phase, type and project.",
		"phase", "type", "project")
	wlGPUs      = desc("runway_workload_allocated_gpus", "GPUs a workload's placed pods hold.", workloadLabels...)
	wlCPU       = desc("runway_workload_allocated_cpu_cores", "CPU cores a workload's placed pods hold.", workloadLabels...)
	wlMem       = desc("runway_workload_allocated_memory_bytes", "Memory in bytes a workload's placed pods hold.", workloadLabels...)
	nodesDesc   = desc("runway_nodes", "Nodes by node pool and readiness.", "node_pool", "ready")
	devicesDesc = desc("runway_gpu_devices", "GPU devices by node pool and state (free, whole, shared, unhealthy).",
		"node_pool", "state")
	deviceAlloc = desc("runway_gpu_device_allocated_gpus", "Share of one GPU device held by pods, 0 to 1.",
		"node_pool", "node", "device")
)

// modelCollector reports the cache's model at scrape time.
type modelCollector struct{ s *Server }

func (modelCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, q := range []queueDesc{queueDeserved, queueFairShare, queueAllocated, queueRequested, queueLimit} {
		ch <- q.gpus
		ch <- q.cpu
		ch <- q.mem
	}
	for _, d := range []*prometheus.Desc{pendingDesc, workloadsDesc, wlGPUs, wlCPU, wlMem, nodesDesc, devicesDesc, deviceAlloc} {
		ch <- d
	}
}

// sample is one series' value, read under the cache's lock; the metrics
// are built from it after the lock is released, so a scrape holds up the
// scheduling loop only for the reading.
type sample struct {
	desc   *prometheus.Desc
	value  float64
	labels []string
}

func (mc modelCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range mc.read() {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, s.value, s.labels...)
	}
}

// read takes the model's values.
func (mc modelCollector) read() []sample {
	var out []sample
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		out = append(out, sample{d, v, labels})
	}
	pending := mc.s.pendingByCheck()
	c := mc.s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return nil
	}
	out = make([]sample, 0, 16*len(c.state.Projects())+4*len(c.workloads))
	st := c.state
	scheduling.ComputeFairShares(st)
	for _, d := range st.Departments {
		for _, q := range append([]*cluster.Queue{d}, d.Children...) {
			for _, p := range st.Pools {
				l := []string{p.Name, q.Name, q.Kind.String(), d.Name}
				qu, u := q.Quotas[p.Index], q.Usage[p.Index]
				limit := cluster.Resources{GPU: qu.EffectiveLimit(cluster.GPU), CPU: qu.EffectiveLimit(cluster.CPU),
					Memory: qu.EffectiveLimit(cluster.Memory)}
				for _, x := range []struct {
					d queueDesc
					r cluster.Resources
				}{{queueDeserved, qu.Deserved}, {queueFairShare, q.FairShare[p.Index]}, {queueAllocated, u.Allocated},
					{queueRequested, u.Requested()}, {queueLimit, limit}} {
					gauge(x.d.gpus, milli(x.r.GPU), l...)
					gauge(x.d.cpu, milli(x.r.CPU), l...)
					gauge(x.d.mem, bytes(x.r.Memory), l...)
				}
			}
		}
	}
	for k, n := range pending {
		gauge(pendingDesc, float64(n), k.pool, k.queue, k.check)
	}
	type wkey struct{ phase, typ, project string }
	counts := map[wkey]int{}
	for id, raw := range c.workloads {
		phase := raw.GetStatus().GetPhase()
		if w := st.Workload(id); w != nil {
			phase = phaseOf(w)
		}
		project, _, _ := strings.Cut(id, "/")
		counts[wkey{enumName(phase.String(), "WORKLOAD_PHASE_"), enumName(raw.GetType().String(), "WORKLOAD_TYPE_"), project}]++
	}
	for k, n := range counts {
		gauge(workloadsDesc, float64(n), k.phase, k.typ, k.project)
	}
	for _, w := range st.Workloads() {
		if w.PlacedPods() == 0 || w.Pool() == nil {
			continue
		}
		h := w.Held()
		dept := ""
		if w.Project.Parent != nil {
			dept = w.Project.Parent.Name
		}
		l := []string{w.Project.Name, w.Name, w.Pool().Name, dept}
		gauge(wlGPUs, milli(h.GPU), l...)
		gauge(wlCPU, milli(h.CPU), l...)
		gauge(wlMem, float64(h.Memory), l...)
	}
	mc.collectNodes(gauge)
	return out
}

// collectNodes reports nodes by readiness and devices by state; the
// caller holds the cache's lock.
func (mc modelCollector) collectNodes(gauge func(*prometheus.Desc, float64, ...string)) {
	c := mc.s.cache
	type nkey struct{ pool, ready string }
	nodes := map[nkey]int{}
	devices := map[nkey]int{} // ready holds the device state here
	for _, p := range c.state.Pools {
		for _, n := range p.Nodes {
			nodes[nkey{p.Name, strconv.FormatBool(n.Ready)}]++
			for _, d := range n.Devices {
				state := "free"
				switch {
				case d.Whole:
					state = "whole"
				case d.Shared > 0:
					state = "shared"
				}
				devices[nkey{p.Name, state}]++
				gauge(deviceAlloc, float64(d.Used)/float64(cluster.FullDevice), p.Name, n.Name, strconv.Itoa(d.Index))
			}
			// The model holds only healthy devices; the unhealthy ones are
			// on the stored node.
			for _, d := range c.nodes[n.Name].GetDevices() {
				if !d.GetHealthy() {
					devices[nkey{p.Name, "unhealthy"}]++
				}
			}
		}
		for _, state := range []string{"free", "whole", "shared", "unhealthy"} {
			gauge(devicesDesc, float64(devices[nkey{p.Name, state}]), p.Name, state)
		}
		for _, ready := range []string{"true", "false"} {
			gauge(nodesDesc, float64(nodes[nkey{p.Name, ready}]), p.Name, ready)
		}
	}
}

type pendingKey struct{ pool, queue, check string }

// pendingByCheck counts the last cycle's waiting workloads by pool, project
// and check (each workload once per pool and check).
func (s *Server) pendingByCheck() map[pendingKey]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[pendingKey]int{}
	for id, d := range s.lastPlan {
		project, _, _ := strings.Cut(id, "/")
		seen := map[pendingKey]bool{}
		for _, r := range d.pending {
			k := pendingKey{r.Pool, project, checkName(r.Check)}
			if !seen[k] {
				seen[k] = true
				out[k]++
			}
		}
	}
	return out
}

// checkName is the check label: the API's PendingCheck name in lower case
// (limit, capacity, reclaim, ...).
func checkName(c scheduling.Check) string {
	return enumName(pendingChecks[c].String(), "PENDING_CHECK_")
}

// enumName is a proto enum value's name without its prefix, in lower case.
func enumName(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// milli turns milli-units (GPUs, CPU) into units; Unlimited is +Inf.
func milli(v int64) float64 {
	if v == cluster.Unlimited {
		return math.Inf(1)
	}
	return float64(v) / 1000
}

func bytes(v int64) float64 {
	if v == cluster.Unlimited {
		return math.Inf(1)
	}
	return float64(v)
}
