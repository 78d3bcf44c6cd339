package apierr

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/runwayhq/runway/pkg/sdk"
)

// The helpers below read an error as a client receives it: a gRPC status
// error, possibly wrapped with %w. They also accept an *Error that has not
// been through ToStatus yet, so code inside a service can use them too. They
// read statuses through pkg/sdk, which clients use.

// Info returns the ErrorInfo of err: the first one in a status's details, or
// the one an *Error will carry (with an empty domain). Nil when there is none.
func Info(err error) *errdetails.ErrorInfo {
	var e *Error
	if errors.As(err, &e) {
		return &errdetails.ErrorInfo{Reason: e.reason.String(), Metadata: e.Metadata()}
	}
	return sdk.Info(err)
}

// Reason is the ErrorInfo reason of err, such as "PROJECT_NOT_FOUND", or ""
// when it has none. Branch on it (and the metadata), never on the message.
func Reason(err error) string {
	if info := Info(err); info != nil {
		return info.GetReason()
	}
	return ""
}

// Code is the gRPC code of err: the code of an *Error's reason, of a status,
// or Unknown for any other non-nil error (OK for nil).
func Code(err error) codes.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return status.Code(err)
}

// IsNotFound reports whether err says the resource it named does not exist
// (code NotFound, whatever the kind of resource).
func IsNotFound(err error) bool { return err != nil && Code(err) == codes.NotFound }
