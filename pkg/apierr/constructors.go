package apierr

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
)

// Messages are one English sentence that says what to do, and quote only
// values that are also in the metadata (ARCHITECTURE.md, "Errors").

func newError(reason commonv1.ErrorReason, message string, kv ...string) *Error {
	md := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		md[kv[i]] = kv[i+1]
	}
	return &Error{reason: reason, message: message, metadata: md}
}

// NotFound reports that the named resource does not exist: NOT_FOUND with
// <KIND>_NOT_FOUND and metadata {kind: name}, for example
// NotFound(Project, "projects/team-a") → PROJECT_NOT_FOUND
// {"project": "projects/team-a"}. Role and Priority are INVALID_ARGUMENT:
// they are referenced by a request, never its target.
func NotFound(r Resource, name string) *Error {
	msg := fmt.Sprintf("%s %q does not exist; check the name.", capitalize(r.display), name)
	return newError(r.notFound, msg, r.key, name)
}

// AlreadyExists reports a create with a taken id: ALREADY_EXISTS with
// <KIND>_ALREADY_EXISTS and metadata {kind: name}. For a resource that has no
// such reason (Node, Role, Priority) it is a bug and maps to Internal.
func AlreadyExists(r Resource, name string) *Error {
	msg := fmt.Sprintf("%s %q already exists; choose another id.", capitalize(r.display), name)
	return newError(r.alreadyExists, msg, r.key, name)
}

// InvalidField reports one bad request field: INVALID_ARGUMENT, INVALID_FIELD,
// a BadRequest with the violation, metadata {"field": field}.
func InvalidField(field, description string) *Error {
	return Invalid(FieldViolation{Field: field, Description: description})
}

// Invalid reports every bad field of a request at once (validation should
// collect them, not stop at the first): INVALID_ARGUMENT, INVALID_FIELD, a
// BadRequest with one violation each, and metadata {"field": the paths
// joined with ","}. Call it only with at least one violation (it never
// returns nil, which would become a non-nil error interface).
func Invalid(violations ...FieldViolation) *Error {
	paths := make([]string, len(violations))
	for i, v := range violations {
		paths[i] = v.Field
	}
	var msg string
	switch len(violations) {
	case 0:
		msg = "The request is invalid; check its fields."
	case 1:
		msg = fmt.Sprintf("Field %q is invalid: %s.", violations[0].Field,
			strings.TrimSuffix(violations[0].Description, "."))
	default:
		msg = fmt.Sprintf("Fields %s are invalid; fix each as its field violation says.", quoteAll(paths))
	}
	e := newError(commonv1.ErrorReason_INVALID_FIELD, msg)
	if len(paths) > 0 {
		e.metadata["field"] = strings.Join(paths, ",")
	}
	e.violations = append([]FieldViolation(nil), violations...)
	return e
}

// ImmutableField reports an update_mask path that is output only, immutable
// or unknown: INVALID_ARGUMENT, IMMUTABLE_FIELD, metadata {"field": field},
// with a BadRequest violation on update_mask.
func ImmutableField(field string) *Error {
	msg := fmt.Sprintf("Field %q cannot be updated; remove it from the update mask.", field)
	e := newError(commonv1.ErrorReason_IMMUTABLE_FIELD, msg, "field", field)
	e.violations = []FieldViolation{{Field: "update_mask", Description: fmt.Sprintf("%q is output only, immutable or unknown", field)}}
	return e
}

// InvalidPageToken reports a page_token this server did not issue for the
// same request: INVALID_ARGUMENT, INVALID_PAGE_TOKEN.
func InvalidPageToken() *Error {
	e := newError(commonv1.ErrorReason_INVALID_PAGE_TOKEN,
		"The page token does not belong to this request; list again without a page token.")
	e.violations = []FieldViolation{{Field: "page_token", Description: "not issued for this request"}}
	return e
}

// InvalidFilter reports an AIP-160 filter that cannot be parsed or names an
// unsupported field: INVALID_ARGUMENT, INVALID_FILTER, metadata
// {"filter": filter}.
func InvalidFilter(filter, description string) *Error {
	msg := fmt.Sprintf("Filter %q is invalid: %s.", filter, strings.TrimSuffix(description, "."))
	e := newError(commonv1.ErrorReason_INVALID_FILTER, msg, "filter", filter)
	e.violations = []FieldViolation{{Field: "filter", Description: description}}
	return e
}

// FailedPrecondition reports that the state of subject forbids the request:
// FAILED_PRECONDITION with the given reason (INVALID_STATE_TRANSITION,
// PROJECT_NOT_EMPTY, NODE_POOL_IN_USE, BUILT_IN_RESOURCE, OVER_SUBSCRIBED,
// WORKLOAD_NOT_BOUND, RESUME_TOKEN_EXPIRED) and a PreconditionFailure whose
// violation type is the reason's name. The subject goes into the metadata
// under the reason's first documented key ("name", "project", "nodePool",
// "parent", ...); add the others with With. description is the message: one
// sentence saying what to do, quoting only metadata values.
func FailedPrecondition(reason commonv1.ErrorReason, subject, description string) *Error {
	e := newError(reason, description)
	if subject != "" {
		e.metadata[subjectKey(reason)] = subject
	}
	e.condition = &errdetails.PreconditionFailure_Violation{
		Type: reason.String(), Subject: subject, Description: description,
	}
	return e
}

// EtagMismatch reports a stale etag (AIP-154): ABORTED, ETAG_MISMATCH,
// metadata {"name": name, "etag": current}. current is the resource's etag
// now; pass "" when it is not known.
func EtagMismatch(name, current string) *Error {
	if current == "" {
		return newError(commonv1.ErrorReason_ETAG_MISMATCH,
			fmt.Sprintf("%q was changed since it was read; read it again and retry.", name), "name", name)
	}
	return newError(commonv1.ErrorReason_ETAG_MISMATCH,
		fmt.Sprintf("%q was changed since it was read (its etag is now %q); read it again and retry.", name, current),
		"name", name, "etag", current)
}

// QuotaExceeded reports a hard limit that can never be met (not ordinary
// over-quota work, which stays PENDING): RESOURCE_EXHAUSTED,
// QUOTA_LIMIT_EXCEEDED, a QuotaFailure violation {subject, description},
// metadata {"subject": subject}; add "nodePool", "resource", "requested" and
// "limit" with With. description is the message.
func QuotaExceeded(subject, description string) *Error {
	e := newError(commonv1.ErrorReason_QUOTA_LIMIT_EXCEEDED, description, "subject", subject)
	e.quota = &errdetails.QuotaFailure_Violation{Subject: subject, Description: description}
	return e
}

// PermissionDenied reports that no access rule grants permission on
// resource: PERMISSION_DENIED, metadata {"permission", "resource"}. Also the
// answer when the caller may not learn whether the resource exists.
func PermissionDenied(permission, resource string) *Error {
	msg := fmt.Sprintf("Permission %q on %q is required; ask an administrator for an access rule that grants it.",
		permission, resource)
	return newError(commonv1.ErrorReason_PERMISSION_DENIED, msg, "permission", permission, "resource", resource)
}

// Unauthenticated reports missing or bad credentials: UNAUTHENTICATED with
// reason CREDENTIALS_MISSING or CREDENTIALS_INVALID (one reason for every
// kind of bad credential, so callers cannot probe which users exist).
func Unauthenticated(reason commonv1.ErrorReason) *Error {
	msg := "The credentials are invalid or expired; log in again."
	if reason == commonv1.ErrorReason_CREDENTIALS_MISSING {
		msg = "The request carries no credentials; log in or set a token, then retry."
	}
	return newError(reason, msg)
}

// ApplicationLimit reports that user already has limit personal
// applications: RESOURCE_EXHAUSTED, APPLICATION_LIMIT_EXCEEDED, metadata
// {"user", "limit"}.
func ApplicationLimit(user string, limit int) *Error {
	msg := fmt.Sprintf("%q already has %d applications, the most allowed; delete one first.", user, limit)
	return newError(commonv1.ErrorReason_APPLICATION_LIMIT_EXCEEDED, msg, "user", user, "limit", fmt.Sprint(limit))
}

// ObjectLimit reports that project already holds limit objects of kind
// (workloads, watch streams): RESOURCE_EXHAUSTED, OBJECT_LIMIT_EXCEEDED,
// metadata {"project", "kind", "limit"}.
func ObjectLimit(project, kind string, limit int) *Error {
	msg := fmt.Sprintf("%q already has %d %s, the most allowed; remove some first.", project, limit, kind)
	return newError(commonv1.ErrorReason_OBJECT_LIMIT_EXCEEDED, msg, "project", project, "kind", kind, "limit", fmt.Sprint(limit))
}

// TooManySignInAttempts reports throttled sign-ins: RESOURCE_EXHAUSTED,
// TOO_MANY_SIGN_IN_ATTEMPTS, with a RetryInfo of retryAfter.
func TooManySignInAttempts(retryAfter time.Duration) *Error {
	e := newError(commonv1.ErrorReason_TOO_MANY_SIGN_IN_ATTEMPTS,
		"Too many failed sign-ins; wait and retry.")
	e.retryAfter = retryAfter
	return e
}

// TooManyRefusedCalls reports a client address whose calls are refused
// for a while after too many refused calls: RESOURCE_EXHAUSTED,
// TOO_MANY_REFUSED_CALLS, with a RetryInfo of retryAfter.
func TooManyRefusedCalls(retryAfter time.Duration) *Error {
	e := newError(commonv1.ErrorReason_TOO_MANY_REFUSED_CALLS,
		"Too many refused calls from this address; wait and retry with valid credentials.")
	e.retryAfter = retryAfter
	return e
}

// WatchLimit reports that caller (or, caller "", the server as a whole)
// already holds limit watch streams: RESOURCE_EXHAUSTED,
// WATCH_LIMIT_EXCEEDED, metadata {"caller", "limit"}.
func WatchLimit(caller string, limit int) *Error {
	msg := fmt.Sprintf("%q already holds %d watch streams, the most allowed; close one first.", caller, limit)
	if caller == "" {
		msg = fmt.Sprintf("The server already holds %d watch streams, the most allowed; retry later.", limit)
	}
	return newError(commonv1.ErrorReason_WATCH_LIMIT_EXCEEDED, msg, "caller", caller, "limit", fmt.Sprint(limit))
}

// Unavailable reports a transient failure, NOT_LEADER or STORE_UNAVAILABLE:
// UNAVAILABLE with a RetryInfo of retryAfter (none when it is 0). Wrap the
// underlying error with WithCause so that it is logged, not sent.
func Unavailable(reason commonv1.ErrorReason, retryAfter time.Duration) *Error {
	msg := "The service is briefly unavailable; retry shortly."
	switch reason {
	case commonv1.ErrorReason_NOT_LEADER:
		msg = "This scheduler replica is not the leader; retry shortly."
	case commonv1.ErrorReason_STORE_UNAVAILABLE:
		msg = "The data store cannot be reached right now; retry shortly."
	}
	e := newError(reason, msg)
	e.retryAfter = retryAfter
	return e
}

// Internal is the error for a bug: INTERNAL, INTERNAL_ERROR, metadata
// {"requestId": requestID} when it is known. ToStatus returns it for every
// error it does not recognise; a handler seldom needs it directly.
func Internal(requestID string) *Error {
	if requestID == "" {
		return newError(commonv1.ErrorReason_INTERNAL_ERROR,
			"An internal error occurred; retry, and report it if it persists.")
	}
	return newError(commonv1.ErrorReason_INTERNAL_ERROR,
		fmt.Sprintf("An internal error occurred; retry, and report request id %q if it persists.", requestID),
		"requestId", requestID)
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
