package etcdstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// EventType says what happened to a key.
type EventType int

const (
	// EventPut: the key was created or updated; Item.Msg is the new value.
	EventPut EventType = iota + 1
	// EventDelete: the key was deleted; Item.Msg is the value it had.
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// WatchEvent is one change, or the error that ended the watch.
type WatchEvent[T proto.Message] struct {
	Type EventType
	// Item is the changed item. Item.Revision is the revision of the change
	// (for a delete, the deletion's revision; Item.Etag is then that of the
	// deletion, not of the deleted value).
	Item Item[T]
	// Err, when set, is the last event before the channel closes: a
	// wrapped ErrCompacted (relist, then watch again), ErrUnavailable if
	// the etcd client was closed, or a decode error.
	Err error
}

// Watch is WatchWithin for the whole collection.
func (c *Collection[T]) Watch(ctx context.Context, fromRevision int64) <-chan WatchEvent[T] {
	return c.WatchWithin(ctx, "", fromRevision)
}

// WatchWithin streams every change to keys under prefixWithin with revision
// >= fromRevision, in revision order. After a List, pass Page.Revision+1
// to miss nothing. fromRevision 0 means "changes after the watch is set up",
// which happens asynchronously after WatchWithin returns, so writes made
// just after the call may or may not be seen; pass a revision when it
// matters.
//
// Lost connections and leader changes are handled inside: the watch is
// re-established from the revision after the last one delivered (or the
// last progress notification), so no event is lost or repeated. If etcd
// has compacted that revision the channel yields one event with Err
// wrapping ErrCompacted and closes; the caller relists. When ctx ends, the
// channel closes without an error event. The caller must drain the channel
// until it closes or cancel ctx; events are not dropped, so a slow reader
// slows the watch.
func (c *Collection[T]) WatchWithin(ctx context.Context, prefixWithin string, fromRevision int64) <-chan WatchEvent[T] {
	out := make(chan WatchEvent[T], 64)
	w := &watcher[T]{c: c, prefix: c.prefix + prefixWithin, next: fromRevision, out: out}
	go w.run(ctx)
	return out
}

// Reconnect backoff bounds after the etcd watch stream ends with an error.
const (
	watchRetryMin = 50 * time.Millisecond
	watchRetryMax = 2 * time.Second
)

type watcher[T proto.Message] struct {
	c      *Collection[T]
	prefix string
	next   int64 // the first revision not yet delivered; 0 until known
	out    chan<- WatchEvent[T]
}

func (w *watcher[T]) run(ctx context.Context) {
	defer close(w.out)
	backoff := watchRetryMin
	for {
		delivered, done := w.stream(ctx)
		if done || ctx.Err() != nil {
			return
		}
		if w.c.client.Ctx().Err() != nil { // closed client: retrying cannot help
			w.fail(ctx, fmt.Errorf("watch %s: etcd client closed: %w", w.prefix, ErrUnavailable))
			return
		}
		if delivered {
			backoff = watchRetryMin
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, watchRetryMax)
	}
}

// stream runs one etcd watch until it ends. It reports whether it delivered
// anything (to reset the backoff) and whether the watch is over for good.
func (w *watcher[T]) stream(ctx context.Context) (delivered, done bool) {
	// WithRequireLeader: a member cut off from the leader cancels the
	// stream instead of going silent, so we reconnect to a healthy one.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV(),
		clientv3.WithCreatedNotify(), clientv3.WithProgressNotify()}
	if w.next > 0 {
		opts = append(opts, clientv3.WithRev(w.next))
	}
	for resp := range w.c.client.Watch(wctx, w.prefix, opts...) {
		if resp.CompactRevision != 0 {
			w.fail(ctx, fmt.Errorf("watch %s from revision %d: compacted up to %d: %w", w.prefix, w.next, resp.CompactRevision, ErrCompacted))
			return delivered, true
		}
		if resp.Err() != nil || resp.Canceled {
			return delivered, false
		}
		for _, ev := range resp.Events {
			e, err := w.event(ev)
			if err != nil && w.c.skip != nil {
				w.c.skip(string(ev.Kv.Key), ev.Kv.ModRevision, err)
				w.next = ev.Kv.ModRevision + 1
				continue
			}
			if err != nil {
				w.fail(ctx, err)
				return delivered, true
			}
			if !w.send(ctx, e) {
				return delivered, true
			}
			delivered = true
			w.next = ev.Kv.ModRevision + 1
		}
		// Pin "now" to a revision so a resume cannot skip changes, and
		// advance on progress notifications (sent only once the watch has
		// caught up) so a resume does not restart from an old, possibly
		// compacted, revision. A created notification of a watch from a
		// past revision says nothing about delivery, so it is ignored.
		switch {
		case resp.Created && w.next == 0:
			w.next = resp.Header.Revision + 1
		case resp.IsProgressNotify() && resp.Header.Revision+1 > w.next:
			w.next = resp.Header.Revision + 1
		}
	}
	return delivered, ctx.Err() != nil
}

func (w *watcher[T]) event(ev *clientv3.Event) (WatchEvent[T], error) {
	if ev.Type == clientv3.EventTypePut {
		it, err := w.c.decode(ev.Kv)
		return WatchEvent[T]{Type: EventPut, Item: it}, err
	}
	msg := w.c.newFn()
	if ev.PrevKv != nil {
		if err := proto.Unmarshal(ev.PrevKv.Value, msg); err != nil {
			err = fmt.Errorf("decode %s: %w", ev.PrevKv.Key, err)
			if w.c.skip == nil {
				return WatchEvent[T]{}, err
			}
			// The key is gone all the same: deliver the delete, without
			// the value it had.
			w.c.skip(string(ev.PrevKv.Key), ev.PrevKv.ModRevision, err)
			msg = w.c.newFn()
		}
	}
	id := strings.TrimPrefix(string(ev.Kv.Key), w.c.prefix)
	return WatchEvent[T]{Type: EventDelete, Item: w.c.item(id, msg, ev.Kv.ModRevision)}, nil
}

func (w *watcher[T]) send(ctx context.Context, e WatchEvent[T]) bool {
	select {
	case w.out <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *watcher[T]) fail(ctx context.Context, err error) { w.send(ctx, WatchEvent[T]{Err: err}) }
