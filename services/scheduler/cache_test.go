package scheduler

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// TestCache_RebuildsAfterCompaction: a watch that would resume from a
// compacted revision ends with ErrCompacted; the cache lists again, once,
// and has what was written in between.
func TestCache_RebuildsAfterCompaction(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	c := newCache(cl.Client, time.Now, slog.New(slog.NewTextHandler(io.Discard, nil)), 0)
	var once sync.Once
	c.afterList = func() {
		once.Do(func() {
			node(t, cl.Client, "node-3", 2)
			// One more write, so node-3's revision is below the compaction.
			resp, err := cl.Client.Put(t.Context(), "/test/after", "x")
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := cl.Client.Compact(t.Context(), resp.Header.Revision); err != nil {
				t.Error(err)
			}
		})
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor(t, 3*time.Second, "node-3 in the model", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.state.Node("node-3") != nil
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lists != 2 {
		t.Errorf("listed %d times, want 2 (one rebuild)", c.lists)
	}
	if n := c.state.Node("node-1"); n == nil || !n.Ready || len(n.Devices) != 2 {
		t.Errorf("node-1 after the rebuild: %+v", n)
	}
}
