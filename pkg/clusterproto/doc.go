// Package clusterproto converts stored API resources into the scheduler's
// cluster model: quota's Department, Project and NodePoolQuota into
// cluster.Quota and queue arguments, and workload's Workload into a
// cluster.WorkloadSpec, with every API default applied.
//
// It lives in pkg so that the Quota and Workload services (which write
// these resources and must agree with the defaults) and the Scheduler
// service (which reads them) share one conversion without one service
// importing another (ARCHITECTURE.md: no services/X imports services/Y).
// It imports only gen/go and pkg/cluster: no etcd, no gRPC.
package clusterproto
