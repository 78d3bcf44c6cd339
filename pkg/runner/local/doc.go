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
//	<DataDir>/<Spec.ID>/output.log  stdout and stderr, appended across restarts (0600)
//	<DataDir>/<Spec.ID>/pid         "pid start-time" while it runs (session tracking; a cgroup is its own record)
//	<WorkDir>/<Spec.ID>/            the pod's working directory (the pod's, 0700)
package local
