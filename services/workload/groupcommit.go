package workload

import (
	"context"
	"errors"
	"fmt"
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
// A batch is one Txn: If every key's CreateRevision is 0 and every
// project's CreateRevision is the one its create read, Then put every
// value. Its keys are distinct (a second create of a key already queued
// waits for the next batch, where it sees the first one's outcome). When
// the Txn fails — a key exists, a project is gone, or etcd did not answer
// (the batch may then have committed) — nobody is told anything from it:
// every create of the batch is done again alone, with its caller's
// context (createAlone), so each gets exactly the answer a lone create
// gets: its own stored workload if its create had committed (same uid),
// AlreadyExists only for a key another create holds, NotFound for a
// project that is gone, Unavailable when etcd does not answer.

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
	// project is the project's key and the CreateRevision its create read:
	// the create commits only while that project exists.
	project projectRef
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

	// lostReply is a test seam: when it returns true for a committed
	// batch, the batch is answered as if etcd's reply had been lost.
	lostReply func() bool
}

// projectRef is a project's key and its CreateRevision (which changes only
// when the project is deleted and created again).
type projectRef struct {
	key string
	rev int64
}

// create queues one create and returns the stored copy's revision, or
// fallback = true when the caller must create alone.
func (g *groupCommitter) create(ctx context.Context, id string, msg *workloadv1.Workload, project projectRef) (rev int64, fallback bool, err error) {
	b, err := (proto.MarshalOptions{Deterministic: true}).Marshal(msg)
	if err != nil || len(b) > groupMaxBytes/2 {
		return 0, true, nil // let Collection.Create report it
	}
	r := &createReq{id: id, key: g.prefix + id, val: string(b), msg: msg, project: project,
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

// take splits the queue into the next batch (distinct keys, at most maxOps
// conditions counting each distinct project once, at most groupMaxBytes)
// and what stays queued, in arrival order.
func (g *groupCommitter) take() (batch, rest []*createReq) {
	seen := map[string]bool{}
	projects := map[projectRef]bool{}
	size := 0
	for _, r := range g.queue {
		conds := len(batch) + len(projects) + 1
		if !projects[r.project] {
			conds++
		}
		if seen[r.key] || conds > g.maxOps || size+len(r.val) > groupMaxBytes {
			rest = append(rest, r)
			continue
		}
		seen[r.key] = true
		projects[r.project] = true
		size += len(r.val)
		batch = append(batch, r)
	}
	return batch, rest
}

func (g *groupCommitter) commit(ctx context.Context, batch []*createReq) {
	ctx, cancel := context.WithTimeout(ctx, groupTimeout)
	defer cancel()
	var cmps []clientv3.Cmp
	puts := make([]clientv3.Op, len(batch))
	projects := map[projectRef]bool{}
	for i, r := range batch {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(r.key), "=", 0))
		if !projects[r.project] {
			projects[r.project] = true
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(r.project.key), "=", r.project.rev))
		}
		puts[i] = clientv3.OpPut(r.key, r.val)
	}
	resp, err := g.client.Txn(ctx).If(cmps...).Then(puts...).Commit()
	ok := err == nil && resp.Succeeded && (g.lostReply == nil || !g.lostReply())
	for _, r := range batch {
		if ok {
			r.rev = resp.Header.Revision
		} else {
			r.fallback = true
		}
		close(r.done)
	}
}

// errProjectGone: the project a create was checked against was deleted
// (or deleted and created again) before the create committed.
var errProjectGone = errors.New("the project was deleted")

// createAlone creates one workload with the same conditions as a batch,
// and answers as a lone create: when the key is taken by this very create
// (a batch committed it and its reply was lost), the stored copy.
func (g *groupCommitter) createAlone(ctx context.Context, r *createReq) (etcdstore.Item[*workloadv1.Workload], error) {
	resp, err := g.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(r.key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(r.project.key), "=", r.project.rev)).
		Then(clientv3.OpPut(r.key, r.val)).
		Else(clientv3.OpGet(r.key)).
		Commit()
	if err != nil {
		if ctx.Err() != nil {
			return etcdstore.Item[*workloadv1.Workload]{}, ctx.Err()
		}
		return etcdstore.Item[*workloadv1.Workload]{}, fmt.Errorf("create %s: %w: %w", r.key, etcdstore.ErrUnavailable, err)
	}
	if resp.Succeeded {
		return etcdstore.Item[*workloadv1.Workload]{ID: r.id, Msg: r.msg, Etag: etcdstore.FormatEtag(resp.Header.Revision), Revision: resp.Header.Revision}, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return etcdstore.Item[*workloadv1.Workload]{}, fmt.Errorf("create %s: %w", r.key, errProjectGone)
	}
	stored := new(workloadv1.Workload)
	if err := proto.Unmarshal(kvs[0].Value, stored); err == nil && r.msg.GetUid() != "" && stored.GetUid() == r.msg.GetUid() {
		return etcdstore.Item[*workloadv1.Workload]{ID: r.id, Msg: stored, Etag: etcdstore.FormatEtag(kvs[0].ModRevision), Revision: kvs[0].ModRevision}, nil
	}
	return etcdstore.Item[*workloadv1.Workload]{}, fmt.Errorf("create %s: %w", r.key, etcdstore.ErrAlreadyExists)
}

// groupCreate is store.create through the group committer.
func (s *store) groupCreate(ctx context.Context, id string, w *workloadv1.Workload, project projectRef) (etcdstore.Item[*workloadv1.Workload], error) {
	rev, fallback, err := s.group.create(ctx, id, w, project)
	switch {
	case err != nil:
		return etcdstore.Item[*workloadv1.Workload]{}, err
	case fallback:
		b, err := (proto.MarshalOptions{Deterministic: true}).Marshal(w)
		if err != nil {
			return etcdstore.Item[*workloadv1.Workload]{}, fmt.Errorf("create %s: encode: %w", id, err)
		}
		return s.group.createAlone(ctx, &createReq{id: id, key: s.group.prefix + id, val: string(b), msg: w, project: project})
	}
	return etcdstore.Item[*workloadv1.Workload]{ID: id, Msg: w, Etag: etcdstore.FormatEtag(rev), Revision: rev}, nil
}
