// Package runner is how a bound workload pod runs on its node, behind one
// interface (Runner, Pod) that the node agent drives: local/ runs it as an
// isolated process on the host, container/ as a container of its image on
// a Docker Engine API (dockerd or podman's API service). The Kubernetes
// runtime (services/nodemanager/kube) creates Kubernetes pods instead, and
// kubelet/ finds their processes on a node by cgroup for the agent's
// Kubernetes mode (it starts nothing, so it is no Runner).
package runner
