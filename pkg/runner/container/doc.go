// Package container runs a workload pod as a container of its image on a
// Docker Engine API: dockerd, or podman's API service, which serves the
// same API. One container per pod, named after the runner (a hash of its
// data directory) and the pod, labelled with its project, workload,
// workload uid and pod; its command, the pod's clean environment
// (pkg/runner.Environ), the workload's CPU and memory as the engine's
// limits, its GPUs by CDI name where the backend is NVIDIA's, its working
// directory bind-mounted at the same path as on the host.
//
// The engine's log of each container is copied, followed, into the pod's
// record directory (pkg/runner.LogName), so that the agent serves it as it
// serves a process's. Time slicing pauses and unpauses the container (the
// freezer cgroup: the whole container, nothing escapes). Containers
// outlive the agent: a runner started on the same data directory adopts
// them by name (Start), so none runs twice, and removes those of pods no
// longer bound (Reap).
//
// Find looks for an engine the ecosystem's way: DOCKER_HOST, then the
// default docker socket, then podman's rootful and rootless sockets.
package container
