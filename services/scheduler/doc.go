// Package scheduler is Runway's SchedulerService (proto
// runway.scheduler.v1) and the scheduler replica behind it: it keeps the
// cluster model up to date from etcd, elects one leader among its
// replicas, and has the leader run pkg/scheduling's Cycle and write each
// plan in a fenced etcd transaction. It is the only writer of the bindings
// and evictions prefixes (pkg/etcdstore/schema.go).
//
// The package is split by concern (see README.md):
//
//   - cache.go: Cache, the long-lived cluster.State fed by one list and
//     watch per collection (node pools, departments, projects, nodes,
//     workloads, bindings), applied incrementally;
//   - loop.go: the election (concurrency.Election on
//     /runway/v1/election/scheduler) and the leader's cycle loop;
//   - failover.go: a campaigning replica follows the leader and revokes
//     the lease of one whose process is gone; the takeover's phases;
//   - apply.go: a plan as etcd writes (bindings, binding deletes, eviction
//     events) and their commit fenced by the election key;
//   - server.go: Server, New(Config, Deps), Register/RegisterGateway and the
//     queries (GetQueue, ListQueues, ExplainWorkload, GetLeader).
package scheduler
