// Package cluster is the scheduler's model of a cluster: node pools, nodes and
// their GPU devices, the department → project queue tree with quotas, and the
// workloads with where each of their pods runs.
//
// A State is long-lived and updated incrementally (a node added, a workload
// submitted, pods placed or evicted), so that a scheduling cycle never copies
// the whole cluster: it mutates the State tentatively, records every change in
// an undo log, and rolls back to a mark (see Mark and Rollback). Aggregates a
// cycle needs at every step (per-queue allocation, free GPUs per node, the
// index of nodes by free GPUs) are kept up to date by the same mutations.
//
// Each placed pod also records when it was placed relative to the others
// (Placement.Order): the state numbers pods as they are placed, or a store
// that lists them in any order gives its own order (PlaceInOrder).
//
// Units: GPUs in milli-GPUs, CPU in milli-cores, memory in bytes (Resources).
// Every iteration that can influence a decision runs in a defined order
// (declaration order, then name), never in map order.
package cluster
