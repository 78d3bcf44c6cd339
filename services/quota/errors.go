package quota

import (
	"context"
	"errors"
	"fmt"
	"time"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// storeRetryAfter is the RetryInfo sent with STORE_UNAVAILABLE.
const storeRetryAfter = time.Second

// maxAttempts bounds how often a write is re-read and retried after a
// concurrent change (errConflict) before the caller gets ABORTED.
const maxAttempts = 5

// storeErr turns an error of the store about the resource `name` of kind r
// into the API error a client sees. Errors it does not know are returned as
// they are and become Internal (logged, never sent) in pkg/grpcserver.
func storeErr(err error, r apierr.Resource, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, etcdstore.ErrNotFound):
		return apierr.NotFound(r, name)
	case errors.Is(err, etcdstore.ErrAlreadyExists):
		return apierr.AlreadyExists(r, name)
	case errors.Is(err, etcdstore.ErrInvalidPageToken), errors.Is(err, etcdstore.ErrPageTokenExpired):
		return apierr.InvalidPageToken().WithCause(err)
	case errors.Is(err, etcdstore.ErrUnavailable):
		return apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, storeRetryAfter).WithCause(err)
	}
	return err
}

// retry runs attempt, which reads, decides and commits one change, until it
// commits or fails for another reason than errConflict. Each attempt reads
// afresh, so a caller's stale etag is reported as ETAG_MISMATCH by the
// attempt itself; a resource that keeps changing under us gives ABORTED.
func retry(name string, attempt func() error) error {
	for range maxAttempts {
		if err := attempt(); !errors.Is(err, errConflict) {
			return err
		}
	}
	return apierr.EtagMismatch(name, "")
}

// errEtag is ETAG_MISMATCH for a stale etag sent by the caller.
func errEtag(name, current string) error { return apierr.EtagMismatch(name, current) }

// settingsErr is storeErr for the settings singleton, which always exists
// (New creates it): its absence is a bug, so it maps to Internal.
func settingsErr(err error) error {
	if errors.Is(err, etcdstore.ErrNotFound) {
		return fmt.Errorf("the settings singleton is missing (quota.New creates it): %w", err)
	}
	return storeErr(err, apierr.Project, settingsName)
}
