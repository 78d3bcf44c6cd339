package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// DefaultMaxOps is etcd's default --max-txn-ops (embed.DefaultMaxTxnOps).
const DefaultMaxOps = 128

// Batch collects puts and deletes on any keys and commits them in ONE etcd
// Txn: all are written, or (if any condition fails) none. Conditions are
// per key (PutIf, DeleteIf, Check: the key's ModRevision must equal a value,
// 0 meaning absent) and an optional fence (Fence: a key's CreateRevision
// must equal a value; the scheduler fences its plans with its election key
// so a deposed leader cannot commit).
//
// A Batch is built by one goroutine and committed once. Builder methods
// return the Batch for chaining; the first misuse (an encode error, a key
// written twice) is remembered and returned by Commit.
type Batch struct {
	// MaxOps bounds the writes, and separately the conditions, of one Txn.
	// It must not exceed the server's --max-txn-ops (128 by default, also in
	// embed). A batch over it is rejected with ErrBatchTooLarge, never split:
	// a split batch would no longer be atomic. Callers that write more must
	// choose their own atomic units.
	MaxOps int

	client  *clientv3.Client
	writes  []clientv3.Op
	written map[string]bool
	conds   []batchCond
	err     error
}

type batchCond struct {
	key   string
	fence bool  // compare CreateRevision (a fence), else ModRevision
	want  int64 // 0 means "key absent"
}

// NewBatch returns an empty batch on client with MaxOps = DefaultMaxOps.
func NewBatch(client *clientv3.Client) *Batch {
	return &Batch{MaxOps: DefaultMaxOps, client: client, written: map[string]bool{}}
}

// Put writes msg to key unconditionally.
func (b *Batch) Put(key string, msg proto.Message) *Batch {
	val, err := marshal.Marshal(msg)
	if err != nil {
		b.setErr(fmt.Errorf("batch put %s: encode: %w", key, err))
		return b
	}
	if b.write(key) {
		b.writes = append(b.writes, clientv3.OpPut(key, string(val)))
	}
	return b
}

// PutIf writes msg to key if the key's ModRevision is modRev at commit time;
// modRev 0 means the key must be absent (a create). Use ParseEtag or
// Item.Revision for modRev.
func (b *Batch) PutIf(key string, msg proto.Message, modRev int64) *Batch {
	return b.Put(key, msg).Check(key, modRev)
}

// Delete removes key unconditionally (a missing key is not an error).
func (b *Batch) Delete(key string) *Batch {
	if b.write(key) {
		b.writes = append(b.writes, clientv3.OpDelete(key))
	}
	return b
}

// DeleteIf removes key if its ModRevision is modRev at commit time.
func (b *Batch) DeleteIf(key string, modRev int64) *Batch {
	return b.Delete(key).Check(key, modRev)
}

// Check adds a condition without a write: key's ModRevision must be modRev
// (0: absent) at commit time. Use it for keys a plan was computed from, so a
// plan made from stale reads is rejected (Nomad's plan apply).
func (b *Batch) Check(key string, modRev int64) *Batch {
	if modRev < 0 {
		b.setErr(fmt.Errorf("batch check %s: revision %d is negative: %w", key, modRev, ErrInvalidArgument))
		return b
	}
	b.conds = append(b.conds, batchCond{key: key, want: modRev})
	return b
}

// Fence makes the whole batch conditional on key existing with
// CreateRevision createRev: for an election, the leader key and the
// revision from concurrency.Election.Key() and .Rev().
func (b *Batch) Fence(key string, createRev int64) *Batch {
	if createRev <= 0 {
		b.setErr(fmt.Errorf("batch fence %s: create revision %d is not a revision: %w", key, createRev, ErrInvalidArgument))
		return b
	}
	b.conds = append(b.conds, batchCond{key: key, fence: true, want: createRev})
	return b
}

// Len is the number of writes so far.
func (b *Batch) Len() int { return len(b.writes) }

// Commit applies the batch atomically and returns the revision it was
// written at. If any condition fails nothing is written and the error is a
// *ConflictError (ErrConflict) naming each failed condition with the value
// found. An empty batch is a no-op returning 0.
func (b *Batch) Commit(ctx context.Context) (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(b.writes) > b.MaxOps || len(b.conds) > b.MaxOps {
		return 0, fmt.Errorf("commit batch: %d writes and %d conditions, over the limit of %d per transaction: %w",
			len(b.writes), len(b.conds), b.MaxOps, ErrBatchTooLarge)
	}
	if len(b.writes) == 0 && len(b.conds) == 0 {
		return 0, nil
	}
	cmps := make([]clientv3.Cmp, len(b.conds))
	reads := make([]clientv3.Op, len(b.conds))
	for i, c := range b.conds {
		target := clientv3.ModRevision(c.key)
		if c.fence {
			target = clientv3.CreateRevision(c.key)
		}
		cmps[i] = clientv3.Compare(target, "=", c.want)
		reads[i] = clientv3.OpGet(c.key, clientv3.WithKeysOnly())
	}
	resp, err := b.client.Txn(ctx).If(cmps...).Then(b.writes...).Else(reads...).Commit()
	if err != nil {
		return 0, wrapErr(ctx, "commit batch of", fmt.Sprintf("%d writes", len(b.writes)), err)
	}
	if !resp.Succeeded {
		return 0, b.conflict(resp)
	}
	return resp.Header.Revision, nil
}

// conflict names the conditions that failed, from the Else reads, which
// etcd took atomically with the failed comparison.
func (b *Batch) conflict(resp *clientv3.TxnResponse) error {
	ce := &ConflictError{}
	for i, c := range b.conds {
		var got int64
		if kvs := resp.Responses[i].GetResponseRange().GetKvs(); len(kvs) > 0 {
			got = kvs[0].ModRevision
			if c.fence {
				got = kvs[0].CreateRevision
			}
		}
		if got == c.want {
			continue
		}
		switch {
		case c.fence && got == 0:
			ce.Failed = append(ce.Failed, fmt.Sprintf("fence %s: key is gone, want create revision %d", c.key, c.want))
		case c.fence:
			ce.Failed = append(ce.Failed, fmt.Sprintf("fence %s: create revision %d, want %d", c.key, got, c.want))
		case c.want == 0:
			ce.Failed = append(ce.Failed, fmt.Sprintf("%s: exists at revision %d, want absent", c.key, got))
		case got == 0:
			ce.Failed = append(ce.Failed, fmt.Sprintf("%s: absent, want revision %d", c.key, c.want))
		default:
			ce.Failed = append(ce.Failed, fmt.Sprintf("%s: revision %d, want %d", c.key, got, c.want))
		}
	}
	if len(ce.Failed) == 0 { // cannot happen: etcd said a comparison failed
		ce.Failed = []string{"a condition failed"}
	}
	return ce
}

// write records that key is written, rejecting a second write to it: etcd
// refuses duplicate keys in one Txn, and the intent would be ambiguous.
func (b *Batch) write(key string) bool {
	if b.written[key] {
		b.setErr(fmt.Errorf("batch: key %s written twice: %w", key, ErrInvalidArgument))
		return false
	}
	b.written[key] = true
	return true
}

func (b *Batch) setErr(err error) {
	if b.err == nil {
		b.err = err
	}
}
