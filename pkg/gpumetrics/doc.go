// Package gpumetrics is what the node agent measures of its GPUs: GPU idle
// time per workload pod (Idle, the product's definition) and the
// Prometheus series it exports (Metrics).
package gpumetrics
