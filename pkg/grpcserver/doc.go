// Package grpcserver is the bootstrap every Runway service runs on, alone
// (`runway serve <svc>`) or all together (`runway dev`): one *grpc.Server
// with the shared interceptor chain, gRPC health and reflection, and the
// grpc-gateway REST mux, all on ONE listener.
//
//	            one TCP listener (Config.Listen)
//	                       │
//	     http.Server, HTTP/1.1 + h2c (unencrypted HTTP/2)
//	                       │
//	   HTTP/2 and Content-Type application/grpc?
//	      │ yes                              │ no
//	grpc.Server.ServeHTTP          GET /openapi.json, GET /healthz, /metrics;
//	      │                        /v1/... → runtime.ServeMux; the rest →
//	      │                        Config.UI (the web UI) when set
//	      │                                  │ (gateway handlers)
//	      │◄──── loopback *grpc.ClientConn ──┘ (same address, h2c)
//	      ▼
//	recover → request id + access log → bounds → auth slot → apierr mapping → handler
//
// The chain, outermost first:
//
//   - recover: a panic anywhere below becomes Internal (INTERNAL_ERROR with
//     the request id); the value and stack are logged, the server keeps
//     serving.
//   - request id and access log: the id comes from the `x-request-id`
//     metadata (REST: the X-Request-Id header) when it looks sane, or is
//     generated; it is echoed in the response header `x-request-id` (REST:
//     X-Request-Id) and readable with RequestID(ctx). One log line per call
//     with method, code, duration and request id.
//   - bounds: every request message (each message of a stream) within
//     pkg/bounds' limits, else INVALID_ARGUMENT naming the field, before
//     anything holds on to it. The whole message is bounded before it is
//     read: Config.MaxMessageBytes (1 MiB) as grpc.MaxRecvMsgSize, and as
//     the REST body's limit (413 naming it). A REST body must arrive within
//     Config.BodyTimeout (408), headers within 10 s, and an idle keep-alive
//     connection is closed after 2 minutes.
//   - auth: Config.Auth / Config.AuthStream (pkg/auth), skipped when nil.
//     Errors it returns itself are mapped like handler errors.
//   - apierr: an error the handler returns that is not already a gRPC status
//     goes through apierr.ToStatus with the service's API domain
//     (Config.Domains, or derived from the proto package:
//     runway.quota.v1 → quota.runway.dev).
//   - interceptors passed in Config.ServerOptions (for example request
//     validation), then the handler.
//
// TLS: with Config.TLS the one listener serves TLS only (HTTP/2 by ALPN for
// gRPC, HTTP/1.1 for REST); mutual TLS when it requires client
// certificates (LoadTLS with a client CA). The gateway's loopback
// connection then pins the server's own certificate and presents it.
// Without Config.TLS it serves plaintext, for loopback (`runway dev`).
//
// Why one listener without cmux: net/http serves unencrypted HTTP/2 itself
// (http.Protocols.SetUnencryptedHTTP2, Go 1.24+; golang.org/x/net/http2/h2c
// is deprecated), and gRPC over HTTP/2 is routed by content type to
// grpc.Server.ServeHTTP, which supports unary and streaming calls.
//
// Why shutdown is http.Server.Shutdown and not grpc.Server.GracefulStop:
// under ServeHTTP, GracefulStop "drains" each call's transport by closing it,
// which cancels calls in flight (grpc v1.85 handler_server.go). So Serve
// stops like this when its context is done: health turns NOT_SERVING,
// http.Server.Shutdown closes the listener, sends GOAWAY and waits up to
// Config.ShutdownTimeout for every call (gRPC and REST) to finish; what is
// still running then (long watches) is cancelled with grpc.Server.Stop and
// http.Server.Close. The loopback connection is closed last.
package grpcserver
