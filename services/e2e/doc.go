// Package e2e holds Runway's multi-process end-to-end tests: a standalone
// etcd (bin/etcd, built by `make test-bins`), every service as its own
// `runway serve` process and node agents as `runway agent` processes, driven
// through the generated gRPC clients.
package e2e
