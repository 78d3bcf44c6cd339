package workload

import (
	"context"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Group commit of creates (issue 3, "Measure"): concurrent creates are
// queued and written together, one etcd Txn for a batch, instead of one
// round trip each. There is no goroutine of its own: the first caller to
// find no commit in flight becomes the committer; it commits batches while
// creates are queued and hands each waiter its own result.
//
// A batch is one Txn: If every key's CreateRevision is 0, Then put every
// value. Its keys are distinct (a second create of a key already queued
// waits for the next batch, where it sees the first one's outcome). When
// the Txn fails — a key exists, or etcd did not answer — nobody is told
// anything from it: every create of the batch is done again alone, with
// its caller's context, by Collection.Create (create-if-absent), so each
// gets exactly the answer a lone create gets (AlreadyExists only for the
// keys that exist) and one bad key never fails the others.

// groupMaxBytes bounds the values of one batch, well below etcd's default
// request size limit (1.5 MiB).
const groupMaxBytes = 1 << 20

// groupTimeout bounds one batch Txn; it runs detached from the committer's
// own context, since it carries other callers' writes.
const groupTimeout = 30 * time.Second

type createReq struct {
	id  string // ClusterID below the prefix
	key string
	val string
	msg *workloadv1.Workload
	// done is closed once rev or fallback is set.
	done chan struct{}
	// lead is closed (and promoted set, under groupCommitter.mu) when this
	// create's caller is to commit the queue.
	lead     chan struct{}
	promoted bool
	rev      int64 // the Txn's revision when the batch was committed
	fallback bool  // the batch failed: create alone
}

type groupCommitter struct {
	client *clientv3.Client
	prefix string
	maxOps int

	mu       sync.Mutex
	queue    []*createReq
	flushing bool
}

// create queues one create and returns the stored copy's revision, or
// fallback = true when the caller must create alone.
func (g *groupCommitter) create(ctx context.Context, id string, msg *workloadv1.Workload) (rev int64, fallback bool, err error) {
	b, err := (proto.MarshalOptions{Deterministic: true}).Marshal(msg)
	if err != nil || len(b) > groupMaxBytes/2 {
		return 0, true, nil // let Collection.Create report it
	}
	r := &createReq{id: id, key: g.prefix + id, val: string(b), msg: msg,
		done: make(chan struct{}), lead: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, r)
	if !g.flushing {
		g.flushing = true
		r.promoted = true
		close(r.lead)
	}
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.rev, r.fallback, nil
	case <-r.lead:
		g.flush(context.WithoutCancel(ctx), r)
		<-r.done // flush returns once r is done
		return r.rev, r.fallback, nil
	case <-ctx.Done():
	}
	// Cancelled while queued. A create already in a batch may still be
	// committed, as for any cancelled call; one still queued is dropped. A
	// waiter promoted to committer meanwhile commits before it leaves, so
	// the others are not left without one.
	g.mu.Lock()
	promoted := r.promoted
	if i := slices.Index(g.queue, r); i >= 0 && !promoted {
		g.queue = slices.Delete(g.queue, i, i+1)
	}
	g.mu.Unlock()
	if promoted {
		g.flush(context.WithoutCancel(ctx), r)
	}
	return 0, false, ctx.Err()
}

// flush commits batches until own is done, then hands the committer's role
// to the oldest queued create, or ends it if none is queued: no caller
// commits others' creates for longer than its own takes.
func (g *groupCommitter) flush(ctx context.Context, own *createReq) {
	for {
		g.mu.Lock()
		select {
		case <-own.done:
			if len(g.queue) == 0 {
				g.flushing = false
			} else {
				next := g.queue[0]
				next.promoted = true
				close(next.lead)
			}
			g.mu.Unlock()
			return
		default:
		}
		batch, rest := g.take()
		g.queue = rest
		g.mu.Unlock()
		g.commit(ctx, batch)
	}
}

// take splits the queue into the next batch (distinct keys, at most maxOps,
// at most groupMaxBytes) and what stays queued, in arrival order.
func (g *groupCommitter) take() (batch, rest []*createReq) {
	seen := map[string]bool{}
	size := 0
	for _, r := range g.queue {
		if seen[r.key] || len(batch) == g.maxOps || size+len(r.val) > groupMaxBytes {
			rest = append(rest, r)
			continue
		}
		seen[r.key] = true
		size += len(r.val)
		batch = append(batch, r)
	}
	return batch, rest
}

func (g *groupCommitter) commit(ctx context.Context, batch []*createReq) {
	ctx, cancel := context.WithTimeout(ctx, groupTimeout)
	defer cancel()
	cmps := make([]clientv3.Cmp, len(batch))
	puts := make([]clientv3.Op, len(batch))
	for i, r := range batch {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(r.key), "=", 0)
		puts[i] = clientv3.OpPut(r.key, r.val)
	}
	resp, err := g.client.Txn(ctx).If(cmps...).Then(puts...).Commit()
	ok := err == nil && resp.Succeeded
	for _, r := range batch {
		if ok {
			r.rev = resp.Header.Revision
		} else {
			r.fallback = true
		}
		close(r.done)
	}
}

// groupCreate is store.create through the group committer.
func (s *store) groupCreate(ctx context.Context, id string, w *workloadv1.Workload) (etcdstore.Item[*workloadv1.Workload], error) {
	rev, fallback, err := s.group.create(ctx, id, w)
	switch {
	case err != nil:
		return etcdstore.Item[*workloadv1.Workload]{}, err
	case fallback:
		return s.coll.Create(ctx, id, w)
	}
	return etcdstore.Item[*workloadv1.Workload]{ID: id, Msg: w, Etag: etcdstore.FormatEtag(rev), Revision: rev}, nil
}
