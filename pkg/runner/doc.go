// Package runner is how a bound workload pod runs on its node: local/ runs
// it as an isolated process on the host (dev mode, bare-metal agents); a
// Kubernetes runner (kube/) is planned behind the same shape.
package runner
