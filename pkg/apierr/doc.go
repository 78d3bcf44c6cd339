// Package apierr is Runway's one table from domain errors to gRPC statuses
// (shared/ARCHITECTURE.md, "Errors").
//
// Services return the typed errors built here (NotFound, AlreadyExists,
// InvalidField, FailedPrecondition, EtagMismatch, QuotaExceeded,
// PermissionDenied, Unauthenticated, Unavailable, ...), wrapped with %w as
// they travel up. Each carries a runway.common.v1.ErrorReason and the
// metadata quoted in its message. The gRPC code is a pure function of the
// reason (reasons.go, checked against error_reason.proto by a test), so a
// reason can never be returned with two different codes.
//
// ToStatus turns any error into the one status a client sees, using
// errors.As/errors.Is and never the message text:
//
//	*Error                → the reason's code, one ErrorInfo (reason, domain,
//	                        metadata) and the detail the code calls for:
//	                        BadRequest (InvalidArgument), PreconditionFailure
//	                        (FailedPrecondition), QuotaFailure
//	                        (ResourceExhausted), RetryInfo (Unavailable)
//	context.Canceled      → Canceled (passes through, no ErrorInfo)
//	context.DeadlineExceeded → DeadlineExceeded (passes through, no ErrorInfo)
//	a gRPC status error   → unchanged (for example one from a downstream service)
//	anything else         → Internal, INTERNAL_ERROR, a generic message; the
//	                        cause is logged, never sent
//
// pkg/grpcserver calls ToStatus once, in its interceptor chain; handlers
// just return errors. Reason, Info, Code and IsNotFound read a received
// status (or a not yet mapped *Error) on the client side; they depend only on
// grpc/status and the error-details protos, so the SDK can copy them.
package apierr
