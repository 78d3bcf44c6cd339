// Package kube is the Kubernetes runtime: on a Kubernetes cluster it plays
// the node agents' part for every Kubernetes node, so that Runway schedules
// GPU pods there. It runs on the scheduler leader only (scheduler's
// Config.WhileLeading), one for the whole cluster.
//
//	Node informer ─► nodemanager.RegisterNode under one lease (nodes/<n>):
//	                 nvidia.com/gpu, gpu.product / gpu.memory labels, Ready,
//	                 labels (pools, node types); other schedulers' pods on the
//	                 node take their GPUs off what is offered; taints that
//	                 neither --tolerate nor the node's pool tolerates drain it
//	etcd noderoles/ ─► the node's node-role.kubernetes.io/runai-* labels
//	                 patched to the roles SetNodeRoles wrote, then the key
//	                 deleted: the labels are the roles (roles.go)
//	etcd nodepools/ ─► each pool's tolerations, put on Runway's pods in the
//	                 pool with --tolerate's (pools.go)
//	list + watch bindings/ ─► a Pod per bound gang member in its project's
//	                 namespace runway-{project} (schedulerName runway,
//	                 workload/project labels, Runway's mark (mark.go),
//	                 requests, RUNWAY_* env, the container runtime's
//	                 security context: security.go; its credentials as
//	                 Secrets it owns: secrets.go), created with its node set (one
//	                 write; a user's pod is bound with the Binding
//	                 subresource, which marks it); a deleted binding
//	                 (eviction, lost node) deletes the pod with a grace period
//	                 (nodes.go: cordon or an untolerated NoSchedule taint is
//	                 a drain without eviction, NoExecute one with it). The
//	                 pod waits while one of Runway's pods still holds its
//	                 device indexes (terminating ones too); a fraction
//	                 first gets each device's reservation pod and its GPU
//	                 UUID (reserve.go)
//	etcd projects/ ─► namespace runway-{project} (labelled, or adopted with
//	                 the label) and its ResourceQuota (projects.go)
//	Pod informer ─► pod phase ─► nodemanager.PutRun (runs/<n>/…), the same
//	                 run reports an agent writes, which the workload status
//	                 controller folds into the workload's status, with what
//	                 the node agent (Kubernetes mode) annotated and signed
//	                 (mark.go): why it ended the pod (FAILED), its GPU idle
//	                 time
//	             ─► a pod created by a user with schedulerName runway in a
//	                 project's namespace (runway-{project}; a project label
//	                 must agree) becomes a one-pod workload of that project
//	                 (WorkloadService.CreateWorkload, its policies applied,
//	                 called as services/kubernetes/projects/{p}: that
//	                 project's access alone, auth.ProjectCredentials);
//	                 its binding binds that very pod, and deleting the pod
//	                 deletes the workload. Binding annotations count only on
//	                 Runway's pods: in Runway's own namespace (the
//	                 reservation pods) or marked, so no pod reports another
//	                 workload's state; every other pod on a node holds what
//	                 it requests there
//
// Every change is a key on one work queue (a node, a binding, a pod),
// handled by Config.Workers workers; the queue never hands one key to two
// of them, and everything written about a pod is written under the pod's
// key, so one object's writes keep their order while thousands of pods are
// written at once. Each reconciler reads the informers' caches and the
// bindings map, so a missed event is repaired by the next one or a resync.
// The client's limits (client-go's 5 requests/s by default) are the
// caller's: `runway serve --kube-api-qps/--kube-api-burst`.
package kube
