package apierr

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Option adjusts ToStatus.
type Option func(*options)

type options struct {
	requestID string
	logger    *slog.Logger
}

// WithRequestID puts the request id into an Internal status (message and
// "requestId" metadata) and into the log line for its cause, so the two can
// be matched.
func WithRequestID(id string) Option { return func(o *options) { o.requestID = id } }

// WithLogger is where the cause of an Internal status is logged; by default
// slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// ToStatus maps err to the status a client receives (see the package
// comment for the table); domain is the API domain of the service answering,
// such as "quota.runway.dev". A nil err gives a nil status (which is OK).
//
// Only the type of err matters, found with errors.As/errors.Is through any
// %w wrapping; its text is never sent except as the message of an *Error or
// of a status error passed through. Errors it does not recognise are logged
// with their full text and become Internal with a generic message.
func ToStatus(err error, domain string, opts ...Option) *status.Status {
	if err == nil {
		return nil
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var e *Error
	if errors.As(err, &e) {
		if _, known := table[e.reason]; known {
			return e.status(domain)
		}
		return internal(err, domain, o, "error with a reason missing from the apierr table")
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, "The request was cancelled.")
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, "The request ran out of time; retry with a longer deadline.")
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if s := se.GRPCStatus(); s.Code() != codes.OK && s.Code() != codes.Unknown {
			return s
		}
	}
	return internal(err, domain, o, "unmapped error")
}

func internal(cause error, domain string, o options, what string) *status.Status {
	logger := o.logger
	if logger == nil {
		logger = slog.Default()
	}
	logger.Error(what, "err", cause.Error(), "domain", domain, "requestId", o.requestID)
	return Internal(o.requestID).status(domain)
}

// status builds the status of a known reason: one ErrorInfo, then the detail
// its code calls for.
func (e *Error) status(domain string) *status.Status {
	code := CodeOf(e.reason)
	st := status.New(code, e.message)
	details := []protoadapt.MessageV1{&errdetails.ErrorInfo{
		Reason:   e.reason.String(),
		Domain:   domain,
		Metadata: e.Metadata(),
	}}
	if len(e.violations) > 0 {
		br := &errdetails.BadRequest{}
		for _, v := range e.violations {
			br.FieldViolations = append(br.FieldViolations,
				&errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description})
		}
		details = append(details, br)
	}
	if e.condition != nil {
		details = append(details, &errdetails.PreconditionFailure{
			Violations: []*errdetails.PreconditionFailure_Violation{e.condition}})
	}
	if e.quota != nil {
		details = append(details, &errdetails.QuotaFailure{
			Violations: []*errdetails.QuotaFailure_Violation{e.quota}})
	}
	if e.retryAfter > 0 {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(e.retryAfter)})
	}
	withDetails, err := st.WithDetails(details...)
	if err != nil {
		// Only a nil detail can fail to marshal; none of the above is nil.
		return st
	}
	return withDetails
}
