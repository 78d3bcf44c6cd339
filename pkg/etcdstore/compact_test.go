package etcdstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/runwayhq/runway/pkg/etcdstore"
)

// TestCompactor_KeepsTheLastRevisions: history older than Keep revisions
// goes; the last Keep revisions stay readable, and a watcher that far
// behind still resumes.
func TestCompactor_KeepsTheLastRevisions(t *testing.T) {
	cl, c := newProjects(t)
	ctx := t.Context()
	var revs []int64
	for i := range 50 {
		it, err := c.Create(ctx, fmt.Sprintf("p%03d", i), project("p", ""))
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, it.Revision)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = etcdstore.Compactor{Client: cl.Client, Every: 10 * time.Millisecond, Keep: 20,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}.Run(cctx)
	}()
	defer func() { cancel(); <-done }()
	last := revs[len(revs)-1]
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := cl.Client.Get(ctx, c.Key("p000"), clientv3.WithRev(revs[0]))
		if errors.Is(err, rpctypes.ErrCompacted) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision %d still readable after 5 s (err %v)", revs[0], err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := cl.Client.Get(ctx, c.Key("p049"), clientv3.WithRev(last-19)); err != nil {
		t.Fatalf("revision %d (within the last 20) compacted: %v", last-19, err)
	}
	ev := <-c.Watch(ctx, last-10)
	if ev.Err != nil || ev.Item.Revision != last-10 {
		t.Fatalf("watch from 10 revisions back: %+v", ev)
	}
}
