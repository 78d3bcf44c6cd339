package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

// mirror is a watch-fed copy of one etcd prefix of protobuf messages, keyed
// by the id below the prefix. Decisions read it instead of etcd.
type mirror[T proto.Message] struct {
	client *clientv3.Client
	prefix string
	newFn  func() T

	mu    sync.RWMutex
	items map[string]T
	rev   int64 // every change up to rev is in items
}

func newMirror[T proto.Message](client *clientv3.Client, prefix string, newFn func() T) *mirror[T] {
	return &mirror[T]{client: client, prefix: prefix, newFn: newFn, items: map[string]T{}}
}

// load replaces the copy with the prefix as it is now.
func (m *mirror[T]) load(ctx context.Context) error {
	resp, err := m.client.Get(ctx, m.prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read %s: %w", m.prefix, err)
	}
	items := make(map[string]T, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		msg := m.newFn()
		if err := proto.Unmarshal(kv.Value, msg); err != nil {
			return fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		items[strings.TrimPrefix(string(kv.Key), m.prefix)] = msg
	}
	m.mu.Lock()
	m.items, m.rev = items, resp.Header.Revision
	m.mu.Unlock()
	return nil
}

// run follows the prefix from the loaded revision until ctx ends, loading
// again when etcd has compacted the revision it needs.
func (m *mirror[T]) run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := m.follow(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, rpctypes.ErrCompacted) {
			if err := m.load(ctx); err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		time.Sleep(100 * time.Millisecond) // a broken watch: retry from where it was
	}
	return ctx.Err()
}

func (m *mirror[T]) follow(ctx context.Context) error {
	m.mu.RLock()
	from := m.rev + 1
	m.mu.RUnlock()
	// WithRequireLeader: a member cut off from its cluster's leader ends
	// the watch (run then follows again, through another member) instead
	// of leaving access decisions on a copy that silently stopped.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := m.client.Watch(wctx, m.prefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithProgressNotify())
	for resp := range ch {
		if err := resp.Err(); err != nil {
			return err
		}
		m.mu.Lock()
		for _, ev := range resp.Events {
			id := strings.TrimPrefix(string(ev.Kv.Key), m.prefix)
			msg := m.newFn()
			if ev.Type == mvccpb.DELETE || proto.Unmarshal(ev.Kv.Value, msg) != nil {
				// A value that does not decode is not the entry it replaced:
				// keeping that one would honour what was overwritten (a
				// revoked rule, a deleted key), so it goes.
				delete(m.items, id)
			} else {
				m.items[id] = msg
			}
			m.rev = ev.Kv.ModRevision
		}
		// A progress notification is sent only to a watcher that has seen
		// everything up to its header revision.
		if resp.IsProgressNotify() && resp.Header.Revision > m.rev {
			m.rev = resp.Header.Revision
		}
		m.mu.Unlock()
	}
	return ctx.Err()
}

// getAt is id's entry, checked by ok, as of at least etcd revision rev:
// the mirror's copy when ok takes it; otherwise, while the mirror has not
// seen rev, a read from etcd. A token issued by another replica the moment
// before (a login that changed the password, so a new credential
// generation) is then judged on what was written, not on a copy that has
// not caught up; the calls whose copy agrees (nearly all) read nothing.
func (m *mirror[T]) getAt(ctx context.Context, id string, rev int64, ok func(T) bool) bool {
	if v, found := m.get(id); found && ok(v) {
		return true
	}
	if m.revision() >= rev {
		return false
	}
	resp, err := m.client.Get(ctx, m.prefix+id)
	if err != nil || len(resp.Kvs) == 0 {
		return false
	}
	msg := m.newFn()
	return proto.Unmarshal(resp.Kvs[0].Value, msg) == nil && ok(msg)
}

func (m *mirror[T]) get(id string) (T, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v, ok := m.items[id]
	return v, ok
}

// each calls f for every item under the read lock; f must not modify the
// message or call back into the mirror's writers.
func (m *mirror[T]) each(f func(id string, v T)) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for k, v := range m.items {
		f(k, v)
	}
}

func (m *mirror[T]) revision() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rev
}
