// Package metrics is a process's Prometheus registry and the operations
// listener that serves it.
//
// A Registry carries the Go and process collectors and the gRPC server and
// client metrics of go-grpc-middleware's Prometheus provider (their
// interceptors go on the servers and connections the process builds); each
// service registers its own collectors on it (services/scheduler's model,
// pkg/auth's sign-ins and audit, pkg/gpumetrics' devices).
//
// The registry is never served on the API listener: Serve puts GET /metrics
// on a separate operations address, loopback by default. A non-loopback
// address needs a bearer token (Lint and the token check are why this is a
// package of its own rather than a handler in pkg/grpcserver).
package metrics
