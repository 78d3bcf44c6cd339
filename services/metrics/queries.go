package metrics

import (
	"fmt"

	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
)

// query is one series of an entity: its type and PromQL; perPod queries
// keep a pod label.
type query struct {
	typ    metricsv1.MetricType
	promql string
	perPod bool
}

// rateWindow stands in a query for the window of its rate(): series puts
// in one that holds at least four samples and spans two steps.
const rateWindow = "$__rate_window"

// pods' series are the agents' GPU series of one workload's pods;
// devices' are the agents' series of whole devices (empty workload).
const (
	podUtil    = `runway_gpu_utilization{workload!=""}`
	deviceUtil = `runway_gpu_utilization{workload=""}`
)

func workloadQueries(project, id string) []query {
	sel := fmt.Sprintf(`{project=%q,workload=%q}`, project, id)
	return []query{
		{metricsv1.MetricType_METRIC_TYPE_GPU_UTILIZATION, `avg by (pod) (runway_gpu_utilization` + sel + `)`, true},
		{metricsv1.MetricType_METRIC_TYPE_GPU_MEMORY_USED_BYTES, `sum by (pod) (runway_gpu_memory_used_bytes` + sel + `)`, true},
		{metricsv1.MetricType_METRIC_TYPE_CPU_USAGE_CORES, `sum by (pod) (rate(runway_pod_cpu_seconds_total` + sel + `[` + rateWindow + `]))`, true},
		{metricsv1.MetricType_METRIC_TYPE_MEMORY_USAGE_BYTES, `sum by (pod) (runway_pod_memory_bytes` + sel + `)`, true},
		{metricsv1.MetricType_METRIC_TYPE_ALLOCATED_GPUS, `sum(runway_workload_allocated_gpus` + sel + `)`, false},
		{metricsv1.MetricType_METRIC_TYPE_ALLOCATED_CPU_CORES, `sum(runway_workload_allocated_cpu_cores` + sel + `)`, false},
		{metricsv1.MetricType_METRIC_TYPE_ALLOCATED_MEMORY_BYTES, `sum(runway_workload_allocated_memory_bytes` + sel + `)`, false},
	}
}

// queueQueries are a project's or a department's: the queue's series, and
// the GPUs used by the pods of its projects (each pod's utilisation is of
// its share, in device units, so their sum is GPUs used).
func queueQueries(kind, id string) []query {
	sel := fmt.Sprintf(`{kind=%q,queue=%q}`, kind, id)
	used := fmt.Sprintf(`sum(runway_gpu_utilization{workload!="",project=%q})`, id)
	if kind == "department" {
		// The department's projects are the project queues that name it.
		used = fmt.Sprintf(`sum(sum by (project) (%s) * on (project) group_left () `+
			`max by (project) (label_replace(runway_queue_deserved_gpus{kind="project",department=%q}, "project", "$1", "queue", "(.*)") * 0 + 1))`,
			podUtil, id)
	}
	alloc := `sum(runway_queue_allocated_gpus` + sel + `)`
	return []query{
		{metricsv1.MetricType_METRIC_TYPE_ALLOCATED_GPUS, alloc, false},
		{metricsv1.MetricType_METRIC_TYPE_USED_GPUS, used, false},
		{metricsv1.MetricType_METRIC_TYPE_GPU_QUOTA, `sum(runway_queue_deserved_gpus` + sel + `)`, false},
		{metricsv1.MetricType_METRIC_TYPE_FAIR_SHARE_GPUS, `sum(runway_queue_fair_share_gpus` + sel + `)`, false},
		{metricsv1.MetricType_METRIC_TYPE_GPU_UTILIZATION, used + ` / ` + alloc, false},
		{metricsv1.MetricType_METRIC_TYPE_ALLOCATED_CPU_CORES, `sum(runway_queue_allocated_cpu_cores` + sel + `)`, false},
		{metricsv1.MetricType_METRIC_TYPE_ALLOCATED_MEMORY_BYTES, `sum(runway_queue_allocated_memory_bytes` + sel + `)`, false},
	}
}

// deviceQueries are a node's, a node pool's or the cluster's: sel filters
// the devices' allocation series (node_pool, node, device labels).
func deviceQueries(sel string, quota bool) []query {
	devices := `runway_gpu_device_allocated_gpus` + sel
	used := fmt.Sprintf(`sum(%s * on (node, device) group_left () (%s * 0 + 1))`, deviceUtil, devices)
	total := `count(` + devices + `)`
	qs := []query{
		{metricsv1.MetricType_METRIC_TYPE_ALLOCATED_GPUS, `sum(` + devices + `)`, false},
		{metricsv1.MetricType_METRIC_TYPE_USED_GPUS, used, false},
		{metricsv1.MetricType_METRIC_TYPE_TOTAL_GPUS, total, false},
		{metricsv1.MetricType_METRIC_TYPE_GPU_UTILIZATION, used + ` / ` + total, false},
		{metricsv1.MetricType_METRIC_TYPE_GPU_MEMORY_USED_BYTES, fmt.Sprintf(`sum(runway_gpu_memory_used_bytes{workload=""} * on (node, device) group_left () (%s * 0 + 1))`, devices), false},
	}
	if quota {
		poolSel := `{kind="project"}`
		if sel != "" {
			poolSel = `{kind="project",` + sel[1:]
		}
		qs = append(qs,
			query{metricsv1.MetricType_METRIC_TYPE_GPU_QUOTA, `sum(runway_queue_deserved_gpus` + poolSel + `)`, false},
			query{metricsv1.MetricType_METRIC_TYPE_FAIR_SHARE_GPUS, `sum(runway_queue_fair_share_gpus` + poolSel + `)`, false})
	}
	return qs
}
