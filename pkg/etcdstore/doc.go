// Package etcdstore is Runway's typed store of protobuf messages on etcd.
//
// Every service keeps its state under its own key prefix (see schema.go,
// which lists every prefix with the one service allowed to write it). On
// top of a prefix a Collection[T] offers the AIP standard methods:
//
//   - Create writes only if the key is absent (a Txn comparing
//     CreateRevision == 0), else ErrAlreadyExists.
//   - Get returns the message and its etag, else ErrNotFound.
//   - Update and Delete take an etag, the key's ModRevision as a decimal
//     string; a stale one yields ErrEtagMismatch (gRPC Aborted) and nothing
//     is written. An empty etag means "whatever is there now".
//   - List pages through a sub-prefix in key order. The first page fixes
//     the read revision; later pages read at that same revision, so a
//     listing is a consistent snapshot even while writers keep going. The
//     opaque page token carries the last key and that revision; once etcd
//     has compacted the revision the token yields ErrPageTokenExpired.
//   - Watch streams typed put/delete events from a revision, resumes
//     transparently after a reconnect, and ends with ErrCompacted when the
//     revision it needs is gone, so the caller relists (List, then Watch
//     from Page.Revision+1).
//
// Batch commits several puts and deletes from any prefixes in one etcd
// Txn, each optionally conditioned on the key's ModRevision, the whole
// optionally fenced by a key's CreateRevision (the scheduler's election
// key, so a deposed leader cannot commit). It never splits: a batch over
// MaxOps is rejected with ErrBatchTooLarge.
//
// Errors are the sentinels of errors.go wrapped with the operation and key;
// test them with errors.Is. Context cancellation and deadline errors are
// returned unchanged. Values are encoded with deterministic proto.Marshal.
//
// The subpackage etcdtest starts an embedded etcd for tests and for the
// single-process `runway dev` mode.
package etcdstore
