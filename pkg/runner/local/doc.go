// Package local runs a workload pod's command as a local process in its own
// process group, with the pod's GPUs in CUDA_VISIBLE_DEVICES and the RUNWAY_*
// variables in its environment, its stdout and stderr in a log file under
// the data directory, and reports its exit code. Stop ends the whole group:
// SIGTERM, then SIGKILL after a grace period, so that children the command
// started (a shell's background jobs, data-loader workers) do not outlive
// the pod.
//
//	<DataDir>/<Spec.ID>/          the pod's working directory
//	<DataDir>/<Spec.ID>/output.log stdout and stderr, appended across restarts
package local
