// Package container runs a workload pod as a container of its image on a
// Docker Engine API: dockerd, or podman's API service, which serves the
// same API. One container per pod, named after the runner (a hash of its
// data directory) and the pod, labelled with its project, workload,
// workload uid and pod; its command, the pod's clean environment
// (pkg/runner.Environ), the workload's CPU and memory as the engine's
// limits, its GPUs by CDI name where the backend is NVIDIA's, its working
// directory bind-mounted at the same path as on the host.
//
// A container has none of root's reach (security.go): it runs as its
// project's uid (pkg/runner.ProjectUID) or its image's numeric non-root user, with
// every capability dropped, no new privileges, the engine's seccomp
// profile, its own namespaces and no device but its GPUs; root and named
// capabilities only where a policy allowed them at submit
// (pkg/policy.Relaxations). On podman 4 and later each project's
// containers are in a user namespace of their own, whose uid 0 is an
// unprivileged host uid (ProjectHostBase); the project's uid stays the
// host's. Each project's pods share a network of their
// own, which an nftables table of the runner keeps from the node's own
// addresses, other projects' networks and the metadata address
// (network.go). The runner therefore needs root.
//
// Images are pulled as the pod's pull policy says (image.go): always, when
// the engine has none, or never; with the pod's registry credential
// (X-Registry-Auth) only where the image is of that credential's registry.
// A pull that fails fails the pod with the engine's reason ("pulling IMAGE:
// ..."). An image pulled with a credential is pulled again for a pod that
// does not name it, so that one project's private image on the node is not
// another's.
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
