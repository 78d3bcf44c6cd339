// Package metrics is the MetricsService (runway.metrics.v1): over-time
// series of a workload (per pod), a project, a department, a node pool, a
// node and the cluster, and the telemetry of now, read from the metrics
// history (pkg/history: the embedded TSDB or an external Prometheus) with
// PromQL over the series the services export (services/scheduler's queue,
// workload and device series, pkg/gpumetrics' utilisation, the node
// agents' per-pod CPU time and memory: runway_pod_cpu_seconds_total and
// runway_pod_memory_bytes, whose rate over a window of at least four
// samples is a pod's CPU usage).
//
// Queries are built from validated ids only (ValidID: [a-z0-9-]), so a name
// cannot inject PromQL; each series is bounded at MaxPoints points.
// Authorisation is pkg/auth's: the guard checks the view permission on the
// entity before a query runs, and drops from the telemetry the projects the
// caller may not view.
package metrics
