// Package local runs a workload pod's command as a local process, isolated
// as far as a host process can be: as root, under an unprivileged uid of
// its own (or Config.User's), with an environment of only PATH, HOME,
// TMPDIR, the workload's variables and RUNWAY_* (none of the agent's), in
// a working directory outside the runner's data directory, and (as root)
// in a mount namespace of its own: /proc showing only its own processes,
// the agent's data and credentials (Config.Hide) covered (mountns.go). Every
// descendant is followed (group.go: a cgroup v2 directory per pod, else
// its session and parents), so Stop, Kill, Freeze and CPU reach processes
// that left the process group, and a pod ends with its first process.
//
// A pod's first process is the child of a shim (shim.go: the runner's
// own executable started again, in a session of its own), not of the
// agent, so that pods outlive an agent killed with kill -9 and the next
// runner on the same data directory adopts them from their run records:
// the agent's own memory is not needed, and neither is the kernel's exit
// status, which only a parent is told. The shim, not the runner, makes the
// pod's mount namespace, around the pod's command alone: it stays in the
// agent's view to write its records in the (hidden) data directory.
//
//	<DataDir>/<Spec.ID>/output.log  stdout and stderr, appended across restarts (0600)
//	<DataDir>/<Spec.ID>/run         the run record: revision, shim and leader (pid, start time), cgroup, uid, binding (JSON)
//	<DataDir>/<Spec.ID>/exit        how the first process ended, written by the shim (JSON)
//	<WorkDir>/<Spec.ID>/            the pod's working directory (the pod's, 0700)
package local
