package etcdstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// marshal is the one encoding of stored values: deterministic, so equal
// messages are equal bytes (useful for no-op detection and diffs).
var marshal = proto.MarshalOptions{Deterministic: true}

// Item is a stored message with the metadata callers need for optimistic
// concurrency.
type Item[T proto.Message] struct {
	ID       string // the key below the collection prefix, e.g. "team-a/train-1"
	Msg      T
	Etag     string // Revision as a decimal string; pass it back to Update/Delete
	Revision int64  // the key's ModRevision: the etcd revision of its last write
	// Created is the key's CreateRevision, the etcd revision that created
	// it, where the call read or created the key (Get, List, ListAll, a
	// watch's puts, Create); 0 otherwise.
	Created int64
	// Lease is the key's lease (0: none), where the call read the key
	// (Get, List, ListAll, a watch's puts).
	Lease int64
}

// Collection is a typed view of one key prefix holding messages of type T.
// It is safe for concurrent use; it holds no state besides its arguments.
type Collection[T proto.Message] struct {
	client *clientv3.Client
	prefix string
	newFn  func() T
	skip   func(key string, modRev int64, err error) // SkipUndecodable
}

// NewCollection returns the collection of T under prefix, which must end in
// "/" (normally a Prefix* constant of schema.go). newFn returns an empty T
// to decode into, e.g. func() *quotav1.Project { return new(quotav1.Project) }.
// A prefix without the trailing slash is a programming error and panics.
func NewCollection[T proto.Message](client *clientv3.Client, prefix string, newFn func() T) *Collection[T] {
	if !strings.HasSuffix(prefix, "/") {
		panic(fmt.Sprintf("etcdstore: collection prefix %q must end in /", prefix))
	}
	return &Collection[T]{client: client, prefix: prefix, newFn: newFn}
}

// SkipUndecodable returns a copy of the collection whose List, ListAll and
// watches leave out values that do not decode as T, calling report with
// the key, its ModRevision and the error for each (a watch skips the
// event). Without it, such a value fails the call (or ends the watch): one
// bad value would then stop every reader of the prefix. Get still fails on
// it: one key asked for by name has no other answer.
func (c *Collection[T]) SkipUndecodable(report func(key string, modRev int64, err error)) *Collection[T] {
	cp := *c
	cp.skip = report
	return &cp
}

// Prefix returns the collection's key prefix.
func (c *Collection[T]) Prefix() string { return c.prefix }

// Key returns the etcd key of id, for use in a Batch.
func (c *Collection[T]) Key(id string) string { return c.prefix + id }

// Create stores msg under id if, and only if, id is absent: one Txn whose
// condition is CreateRevision == 0. A taken id yields ErrAlreadyExists and
// leaves the stored value untouched.
func (c *Collection[T]) Create(ctx context.Context, id string, msg T) (Item[T], error) {
	key, val, err := c.encode("create", id, msg)
	if err != nil {
		return Item[T]{}, err
	}
	resp, err := c.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val)).
		Commit()
	if err != nil {
		return Item[T]{}, wrapErr(ctx, "create", key, err)
	}
	if !resp.Succeeded {
		return Item[T]{}, fmt.Errorf("create %s: %w", key, ErrAlreadyExists)
	}
	it := c.item(id, msg, resp.Header.Revision)
	it.Created = resp.Header.Revision
	return it, nil
}

// WriteIndexed stores msg under id where the key's ModRevision is rev (0:
// a create, the id absent) and, in the same transaction, each index key
// holding id where that key is absent: unique secondary keys (an email, a
// client id) that a reader resolves with one Get. Nothing is written when
// the id's revision differs or an index key is taken: ErrAlreadyExists for
// a create, else ErrEtagMismatch.
func (c *Collection[T]) WriteIndexed(ctx context.Context, id string, msg T, rev int64, index ...string) (Item[T], error) {
	key, val, err := c.encode("write", id, msg)
	if err != nil {
		return Item[T]{}, err
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", rev)}
	ops := []clientv3.Op{clientv3.OpPut(key, val)}
	for _, k := range index {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		ops = append(ops, clientv3.OpPut(k, id))
	}
	resp, err := c.client.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return Item[T]{}, wrapErr(ctx, "write", key, err)
	}
	if !resp.Succeeded {
		if rev == 0 {
			return Item[T]{}, fmt.Errorf("create %s or its index: %w", key, ErrAlreadyExists)
		}
		return Item[T]{}, fmt.Errorf("update %s or its index: %w", key, ErrEtagMismatch)
	}
	it := c.item(id, msg, resp.Header.Revision)
	if rev == 0 {
		it.Created = resp.Header.Revision
	}
	return it, nil
}

// Get returns the message stored under id, or ErrNotFound.
func (c *Collection[T]) Get(ctx context.Context, id string) (Item[T], error) {
	key, err := c.key("get", id)
	if err != nil {
		return Item[T]{}, err
	}
	resp, err := c.client.Get(ctx, key)
	if err != nil {
		return Item[T]{}, wrapErr(ctx, "get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return Item[T]{}, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	return c.decode(resp.Kvs[0])
}

// Update replaces the message under id. With a non-empty etag it writes
// only if the key's ModRevision still equals it (else *EtagMismatchError,
// ErrEtagMismatch); with an empty etag it writes whatever the current value.
// Either way the key must exist (else ErrNotFound): Update never creates.
func (c *Collection[T]) Update(ctx context.Context, id string, msg T, etag string) (Item[T], error) {
	key, val, err := c.encode("update", id, msg)
	if err != nil {
		return Item[T]{}, err
	}
	resp, err := c.client.Txn(ctx).If(etagCompare(key, etag)).
		Then(clientv3.OpPut(key, val)).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return Item[T]{}, wrapErr(ctx, "update", key, err)
	}
	if !resp.Succeeded {
		return Item[T]{}, preconditionErr("update", key, etag, resp)
	}
	return c.item(id, msg, resp.Header.Revision), nil
}

// Delete removes id, under the same etag rules as Update (empty etag:
// unconditional; missing key: ErrNotFound). It returns the revision of the
// deletion, which watchers see on the delete event.
func (c *Collection[T]) Delete(ctx context.Context, id string, etag string) (int64, error) {
	key, err := c.key("delete", id)
	if err != nil {
		return 0, err
	}
	resp, err := c.client.Txn(ctx).If(etagCompare(key, etag)).
		Then(clientv3.OpDelete(key)).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return 0, wrapErr(ctx, "delete", key, err)
	}
	if !resp.Succeeded {
		return 0, preconditionErr("delete", key, etag, resp)
	}
	return resp.Header.Revision, nil
}

// ParseEtag returns the ModRevision an etag stands for, for Batch
// conditions. An etag this package did not produce yields ErrInvalidArgument.
func ParseEtag(etag string) (int64, error) {
	rev, err := strconv.ParseInt(etag, 10, 64)
	if err != nil || rev <= 0 {
		return 0, fmt.Errorf("etag %q: not a revision: %w", etag, ErrInvalidArgument)
	}
	return rev, nil
}

// FormatEtag is the inverse of ParseEtag.
func FormatEtag(rev int64) string { return strconv.FormatInt(rev, 10) }

// etagCompare is the Txn condition for Update and Delete: the key exists
// (empty etag) or its ModRevision equals the etag. A malformed etag cannot
// be current, so it is a mismatch rather than a bad argument, as AIP-154
// asks (the client must re-read either way).
func etagCompare(key, etag string) clientv3.Cmp {
	if etag == "" {
		return clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
	}
	rev, err := strconv.ParseInt(etag, 10, 64)
	if err != nil || rev <= 0 {
		rev = -1 // matches no key, so the Else branch reports current state
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", rev)
}

// preconditionErr explains a failed Update/Delete from the Else branch's
// read of the key, taken atomically with the failed comparison.
func preconditionErr(op, key, etag string, resp *clientv3.TxnResponse) error {
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return fmt.Errorf("%s %s: %w", op, key, ErrNotFound)
	}
	return &EtagMismatchError{Op: op, Key: key, Etag: etag, CurrentEtag: FormatEtag(kvs[0].ModRevision)}
}

func (c *Collection[T]) key(op, id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%s in %s: empty id: %w", op, c.prefix, ErrInvalidArgument)
	}
	return c.prefix + id, nil
}

func (c *Collection[T]) encode(op, id string, msg T) (string, string, error) {
	key, err := c.key(op, id)
	if err != nil {
		return "", "", err
	}
	b, err := marshal.Marshal(msg)
	if err != nil {
		return "", "", fmt.Errorf("%s %s: encode: %w", op, key, err)
	}
	return key, string(b), nil
}

func (c *Collection[T]) item(id string, msg T, rev int64) Item[T] {
	return Item[T]{ID: id, Msg: msg, Etag: FormatEtag(rev), Revision: rev}
}

// decode turns a stored key-value into an Item. A value that does not parse
// as T is a bug or a schema drift, reported with the key.
func (c *Collection[T]) decode(kv *mvccpb.KeyValue) (Item[T], error) {
	msg := c.newFn()
	if err := proto.Unmarshal(kv.Value, msg); err != nil {
		return Item[T]{}, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	it := c.item(strings.TrimPrefix(string(kv.Key), c.prefix), msg, kv.ModRevision)
	it.Created, it.Lease = kv.CreateRevision, kv.Lease
	return it, nil
}
