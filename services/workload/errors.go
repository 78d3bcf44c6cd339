package workload

import (
	"errors"
	"time"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// storeRetryAfter is the RetryInfo delay sent when etcd cannot be reached.
const storeRetryAfter = time.Second

// apiError maps an error of the store (an etcdstore sentinel, wrapped) about
// the workload name to the API error a client sees. Context errors and
// errors already of apierr pass through; anything else stays as it is and
// becomes Internal in pkg/grpcserver, which logs it.
func apiError(err error, name string) error { return storeError(err, apierr.Workload, name) }

// storeError is apiError for a resource of kind r.
func storeError(err error, r apierr.Resource, name string) error {
	var mismatch *etcdstore.EtagMismatchError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mismatch):
		return apierr.EtagMismatch(name, mismatch.CurrentEtag).WithCause(err)
	case errors.Is(err, etcdstore.ErrNotFound):
		return apierr.NotFound(r, name).WithCause(err)
	case errors.Is(err, etcdstore.ErrAlreadyExists):
		return apierr.AlreadyExists(r, name).WithCause(err)
	case errors.Is(err, etcdstore.ErrInvalidPageToken), errors.Is(err, etcdstore.ErrPageTokenExpired):
		return apierr.InvalidPageToken().WithCause(err)
	case errors.Is(err, etcdstore.ErrCompacted):
		return resumeTokenExpired().WithCause(err)
	case errors.Is(err, etcdstore.ErrUnavailable):
		return apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, storeRetryAfter).WithCause(err)
	}
	return err
}

func resumeTokenExpired() *apierr.Error {
	return apierr.FailedPrecondition(commonv1.ErrorReason_RESUME_TOKEN_EXPIRED, "",
		"The watch position is older than the history the store keeps; watch again without a resume token.")
}
