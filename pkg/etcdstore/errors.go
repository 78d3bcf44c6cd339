package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Every error this package returns wraps at most one of
// them (test with errors.Is), except context errors, which are returned
// unchanged. The gRPC code in each comment is the one pkg/apierr is
// expected to map it to.
var (
	// ErrNotFound: the key does not exist. NotFound.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: Create found the key taken. AlreadyExists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrEtagMismatch: the etag given to Update or Delete is not the key's
	// current one. Aborted (reason ETAG_MISMATCH). The concrete error is an
	// *EtagMismatchError carrying the current etag.
	ErrEtagMismatch = errors.New("etag mismatch")
	// ErrConflict: a Batch condition or its fence did not hold, so nothing
	// was written. Aborted. The concrete error is a *ConflictError naming
	// every condition that failed.
	ErrConflict = errors.New("conflict")
	// ErrCompacted: a Watch needed a revision etcd has compacted; relist.
	ErrCompacted = errors.New("revision compacted")
	// ErrPageTokenExpired: the revision a page token was read at has been
	// compacted; restart the listing. InvalidArgument (INVALID_PAGE_TOKEN).
	ErrPageTokenExpired = errors.New("page token expired")
	// ErrInvalidPageToken: the page token was not issued by this store for
	// this collection and prefix. InvalidArgument (INVALID_PAGE_TOKEN).
	ErrInvalidPageToken = errors.New("invalid page token")
	// ErrInvalidArgument: a caller bug such as an empty id, a negative page
	// size or the same key written twice in one Batch. InvalidArgument.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrBatchTooLarge: a Batch has more operations than its MaxOps (etcd's
	// --max-txn-ops). It is rejected rather than split, because a split
	// batch would not be atomic. Internal: the caller must bound its batches.
	ErrBatchTooLarge = errors.New("batch too large")
	// ErrUnavailable: etcd cannot be reached, has no leader or timed out.
	// Unavailable (STORE_UNAVAILABLE); safe to retry reads, and writes whose
	// conditions make them idempotent.
	ErrUnavailable = errors.New("store unavailable")
	// ErrSchemaVersion: the data was written by a different schema version
	// than this binary understands. FailedPrecondition at startup.
	ErrSchemaVersion = errors.New("schema version mismatch")
)

// EtagMismatchError is returned by Update and Delete when the etag is stale.
// It matches ErrEtagMismatch with errors.Is.
type EtagMismatchError struct {
	Op          string // "update" or "delete"
	Key         string
	Etag        string // the etag the caller sent
	CurrentEtag string // the key's current etag
}

func (e *EtagMismatchError) Error() string {
	return fmt.Sprintf("%s %s: etag %q is not the current %q: %v", e.Op, e.Key, e.Etag, e.CurrentEtag, ErrEtagMismatch)
}

// Is makes errors.Is(err, ErrEtagMismatch) true.
func (e *EtagMismatchError) Is(target error) bool { return target == ErrEtagMismatch }

// ConflictError is returned by Batch.Commit when a condition failed. It
// matches ErrConflict with errors.Is.
type ConflictError struct {
	// Failed describes each failed condition, e.g.
	// "fence /runway/v1/election/scheduler/694d: create revision 9, want 7".
	Failed []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("commit batch: %s: %v", strings.Join(e.Failed, "; "), ErrConflict)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// wrapErr turns an error from the etcd client into one of ours: context
// errors unchanged, connectivity errors wrapped with ErrUnavailable, the rest
// wrapped with the operation and key so no raw etcd error escapes bare.
func wrapErr(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if isUnavailable(err) {
		return fmt.Errorf("%s %s: %w: %w", op, key, ErrUnavailable, err)
	}
	return fmt.Errorf("%s %s: %w", op, key, err)
}

// isUnavailable reports whether err means "etcd will be back": the gRPC code
// Unavailable (no connection, no leader, server timeouts) or a server-side
// DeadlineExceeded. etcd's rpctypes.EtcdError carries its code via Code().
func isUnavailable(err error) bool {
	var coded interface{ Code() codes.Code }
	code := status.Code(err)
	if errors.As(err, &coded) {
		code = coded.Code()
	}
	return code == codes.Unavailable || code == codes.DeadlineExceeded
}
