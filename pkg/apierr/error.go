package apierr

import (
	"maps"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
)

// Error is a domain error a service returns: a reason, a one-sentence message
// for people, the metadata quoted in it, and what ToStatus needs for the
// detail its code calls for. Build it with the constructors of this package;
// its fields are unexported so the code always follows the reason.
//
// An *Error is immutable: With, InField and WithCause return a copy.
type Error struct {
	reason     commonv1.ErrorReason
	message    string
	metadata   map[string]string
	violations []FieldViolation                          // BadRequest
	condition  *errdetails.PreconditionFailure_Violation // PreconditionFailure
	quota      *errdetails.QuotaFailure_Violation        // QuotaFailure
	retryAfter time.Duration                             // RetryInfo when > 0
	cause      error                                     // logged by callers, never sent
}

// FieldViolation is one bad field of a request: its AIP-193 path
// ("workload.spec.gpu.fraction_milli") and what is wrong with it, said as
// what the value must be ("must be between 1 and 1000").
type FieldViolation struct {
	Field       string
	Description string
}

// Error is the message, plus the cause when there is one (for logs only;
// ToStatus never sends the cause).
func (e *Error) Error() string {
	if e.cause != nil {
		return e.message + " (cause: " + e.cause.Error() + ")"
	}
	return e.message
}

// Unwrap returns the cause given to WithCause, so errors.Is still finds, for
// example, a context error under an Unavailable.
func (e *Error) Unwrap() error { return e.cause }

// Reason is the error's reason.
func (e *Error) Reason() commonv1.ErrorReason { return e.reason }

// Code is the gRPC code the reason maps to.
func (e *Error) Code() codes.Code { return CodeOf(e.reason) }

// Message is the sentence a client sees.
func (e *Error) Message() string { return e.message }

// Metadata returns a copy of the ErrorInfo metadata.
func (e *Error) Metadata() map[string]string { return maps.Clone(e.metadata) }

// With returns a copy of e with one more metadata entry. Use it for the
// reason's documented keys beyond the subject, for example
// FailedPrecondition(PROJECT_NOT_EMPTY, ...).With("workloadCount", "3").
// Keys are lowerCamel and never renamed once shipped.
func (e *Error) With(key, value string) *Error {
	c := e.clone()
	c.metadata[key] = value
	return c
}

// InField returns a copy of e that also names the request field that carried
// the bad value, as a BadRequest field violation. Meant for the
// INVALID_ARGUMENT reasons that are not field checks themselves, such as
// NotFound(Role, name).InField("access_rule.role").
func (e *Error) InField(field string) *Error {
	c := e.clone()
	c.violations = append(c.violations, FieldViolation{Field: field, Description: e.message})
	return c
}

// WithCause returns a copy of e that wraps cause: errors.Is/As see it and
// server logs print it, but clients never receive it.
func (e *Error) WithCause(cause error) *Error {
	c := e.clone()
	c.cause = cause
	return c
}

func (e *Error) clone() *Error {
	c := *e
	c.metadata = maps.Clone(e.metadata)
	if c.metadata == nil {
		c.metadata = map[string]string{}
	}
	c.violations = append([]FieldViolation(nil), e.violations...)
	return &c
}
