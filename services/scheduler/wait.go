package scheduler

import (
	"context"
	"strings"
	"time"

	"github.com/runwayhq/runway/pkg/etcdstore"
)

// WaitRevision waits until the bindings watch has applied revision rev
// (for example the latest binding write read from etcd), or until timeout.
func (c *Cache) WaitRevision(ctx context.Context, rev int64, timeout time.Duration) bool {
	return c.waitFor(ctx, timeout, func() bool { return c.bindingRev >= rev })
}

// WaitApplied waits until the model has applied the bindings watch up to
// revision rev (the plan's last binding transaction) and reflects every
// binding write of ws (puts present, deletes gone), or until timeout.
// Waiting for the revision alone is not enough: the events of one
// transaction may be applied in two batches, and a cycle between them
// would see half a gang.
func (c *Cache) WaitApplied(ctx context.Context, ws writes, rev int64, timeout time.Duration) bool {
	// Past rev, every event of rev has been applied; at rev, a later batch
	// may still hold some of its events.
	return c.waitFor(ctx, timeout, func() bool { return c.bindingRev > rev || (c.bindingRev == rev && c.reflects(ws)) })
}

// waitFor waits, woken by each applied batch of events, until done (read
// under the cache's lock) holds, ctx ends or timeout passes.
func (c *Cache) waitFor(ctx context.Context, timeout time.Duration, done func() bool) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		c.mu.Lock()
		ok, ch := done(), c.applied
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// reflects: every binding write of ws is in the model. A reset (relist)
// since the writes counts too: a list is newer than any write it follows.
func (c *Cache) reflects(ws writes) bool {
	for _, g := range ws.groups {
		for _, w := range g.ops {
			id, ok := strings.CutPrefix(w.key, etcdstore.PrefixBindings)
			if !ok {
				continue
			}
			if _, present := c.bindings[id]; present != (w.msg != nil) {
				return false
			}
		}
	}
	return true
}
