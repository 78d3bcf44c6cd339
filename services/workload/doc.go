// Package workload is Runway's WorkloadService: the submission, lifecycle
// and status of workloads (proto runway.workload.v1, API domain
// workload.runway.dev). It is the only writer of the workloads prefix in
// etcd (pkg/etcdstore/schema.go).
//
// The package is split by concern (see README.md):
//
//   - server.go: Server, New(Config, Deps), Register/RegisterGateway for
//     pkg/grpcserver, and the thin RPC handlers;
//   - validate.go and names.go: request rules as BadRequest field
//     violations with AIP-193 paths;
//   - store.go: the etcd keys (`/runway/v1/workloads/{project}/{workload}`)
//     and the etag rule, on pkg/etcdstore;
//   - status.go: the one fold of WorkloadEvents into WorkloadStatus, shared
//     with whoever writes status later (the scheduler and the node agents'
//     reports);
//   - controller.go: Controller, which folds the scheduler's bindings and
//     evictions and the node agents' run reports into workload status (the
//     workloads prefix keeps one writer);
//   - watch.go and filter.go: WatchWorkloads and the AIP-160 filter that
//     ListWorkloads and WatchWorkloads share;
//   - pkg/clusterproto (not here): ToClusterSpec and the Effective*
//     defaults, shared with the scheduler service without an import
//     between services;
//   - projects.go: ProjectChecker; StoredProjects, its production
//     implementation, which reads projects and departments (their
//     scheduling rules) where the quota service stores them; and
//     QuotaProjects, over the generated QuotaService client, which
//     StoredProjects asks for a department's projects;
//   - governance.go, assets.go, scopes.go, examples.go: the
//     GovernanceService (policies, environments, compute resources at the
//     account, department or project scope), registered beside the
//     WorkloadService; pkg/policy holds the policy merge and checks;
//   - credentials.go: the CredentialService (credentials at the same
//     scopes, values write-only, sealed with pkg/sealing; opened only for
//     the agent of the node a pod using them is bound to);
//   - submit.go: what CreateWorkload does before writing: assets, policy
//     defaults and rules, the scheduling rules (node types checked, limits
//     copied into Workload.limits); the controller enforces the limits.
//
// Errors leave the handlers as *apierr.Error values (errors.go maps the
// store's sentinels), which pkg/grpcserver turns into statuses once.
package workload
