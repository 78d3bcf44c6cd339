// Package agent is the NodeManager's per-node agent: it registers its node
// under an etcd lease and keeps the lease alive, watches the scheduler's
// bindings for its node, runs each bound pod through a pkg/runner.Runner
// (pkg/runner/local: host processes, each the child of a shim;
// pkg/runner/container: containers on a Docker Engine API; in both a pod
// outlives its agent and is adopted again after the agent restarts, or,
// had it died with its agent, run again once and reported with
// agent_restarts) and reports the pod's state under runs/.
//
//	Run ─┬─ register: lease grant → nodemanager.RegisterNode (node + lease
//	     │            keys, drain copied) → KeepAlive; lease lost → again
//	     └─ pods: list bindings/<node>/ → watch from the next revision
//	              put   → start the pod if not yet started (read the workload's
//	                      command from workloads/; the binding's ModRevision
//	                      names the run the runner adopts), report RUNNING, then
//	                      SUCCEEDED / FAILED with the exit code (kept on disk
//	                      first: a restarted agent sends it again, never re-runs);
//	                      a binding rewritten (a consolidation move to other
//	                      devices here: a new ModRevision) restarts the pod
//	              delete→ stop every process of the pod, report STOPPED
//	   reporter (report.go): the latest report of each pod, batched, retried
//	        with backoff until stored
//	   collector (collect.go): a finished pod's record, log, directory and run
//	        report go once its binding and workload are gone
//	   gpus (gpus.go): sample the devices each SampleInterval → end pods over
//	        their memory slice, track idle time, export metrics, compute and
//	        enforce each shared device's time-slicing plan, publish plans/<node>
//
// In Kubernetes mode (Config.Kube, kube.go) the kubelet runs the pods and
// the Kubernetes runtime registers the node and reports the pods: the agent
// then only follows the Runway pods on its node (a pod informer, their
// processes by cgroup through pkg/runner/kubelet) with the same GPU
// manager, and writes what it finds on the pods' annotations.
//
// Cancelling Run's context stops the pods it started but does not revoke
// the lease: a killed agent and a cancelled one look the same to the
// cluster, and the node key expires with the lease TTL.
package agent
