package sdk

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every Runway error carries a gRPC code and an ErrorInfo whose reason is
// one of runway.common.v1.ErrorReason (PROJECT_NOT_FOUND, ...): branch on
// the reason (and its metadata), never on the message.

// Info is the ErrorInfo of err (wrapped with %w or not), nil if none.
func Info(err error) *errdetails.ErrorInfo {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return nil
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// Reason is err's ErrorInfo reason, such as "PROJECT_NOT_FOUND"; "" if none.
func Reason(err error) string { return Info(err).GetReason() }

// Code is err's gRPC code (Unknown for an error that is not a status, OK for nil).
func Code(err error) codes.Code { return status.Code(err) }

// Message is err's status message: the one line a person should read.
func Message(err error) string {
	if st, ok := status.FromError(err); ok {
		return st.Message()
	}
	return err.Error()
}

// IsNotFound: the named resource does not exist.
func IsNotFound(err error) bool { return err != nil && Code(err) == codes.NotFound }

// IsAlreadyExists: a resource of that name exists.
func IsAlreadyExists(err error) bool { return err != nil && Code(err) == codes.AlreadyExists }

// IsInvalidArgument: the request is malformed; BadRequest details name the fields.
func IsInvalidArgument(err error) bool { return err != nil && Code(err) == codes.InvalidArgument }

// IsPermissionDenied: the caller may not do this.
func IsPermissionDenied(err error) bool { return err != nil && Code(err) == codes.PermissionDenied }

// FieldViolations lists the fields an InvalidArgument error names.
func FieldViolations(err error) []*errdetails.BadRequest_FieldViolation {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return nil
	}
	var out []*errdetails.BadRequest_FieldViolation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			out = append(out, br.GetFieldViolations()...)
		}
	}
	return out
}
