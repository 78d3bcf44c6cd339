package etcdstore_test

import (
	"context"
	"testing"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

type seen struct {
	Type        etcdstore.EventType
	ID          string
	Description string
	Revision    int64
}

func summary(e etcdstore.WatchEvent[*quotav1.Project]) seen {
	return seen{e.Type, e.Item.ID, e.Item.Msg.GetDescription(), e.Item.Revision}
}

func TestCollection_WatchPutsAndDeletesInOrder(t *testing.T) {
	_, c := newProjects(t)
	ctx := t.Context()
	// Watch(ctx, 0) means "from whenever etcd sets the watch up", which
	// races with the writes below; an explicit revision does not.
	start, err := c.Create(ctx, "start", project("start", ""))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	events := c.Watch(ctx, start.Revision+1)
	a, _ := c.Create(ctx, "a", project("a", "v1"))
	a2, _ := c.Update(ctx, "a", project("a", "v2"), a.Etag)
	delRev, err := c.Delete(ctx, "a", a2.Etag)
	if err != nil {
		t.Fatalf("Delete: %v", err)
	}
	b, _ := c.Create(ctx, "b", project("b", "v1"))

	want := []seen{
		{etcdstore.EventPut, "a", "v1", a.Revision},
		{etcdstore.EventPut, "a", "v2", a2.Revision},
		{etcdstore.EventDelete, "a", "v2", delRev}, // a delete carries the value it removed
		{etcdstore.EventPut, "b", "v1", b.Revision},
	}
	var got []seen
	for range want {
		got = append(got, summary(nextEvent(t, events)))
	}
	if d := diffProto(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}

	// Resume from a revision: a new watch from a's update replays from there.
	replay := c.Watch(ctx, a2.Revision)
	var replayed []seen
	for range want[1:] {
		replayed = append(replayed, summary(nextEvent(t, replay)))
	}
	if d := diffProto(want[1:], replayed); d != "" {
		t.Errorf("replayed events from revision %d (-want +got):\n%s", a2.Revision, d)
	}
}

func TestCollection_WatchWithinPrefix(t *testing.T) {
	_, c := newProjects(t)
	ctx := t.Context()
	first, err := c.Create(ctx, "x/0", project("x", ""))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	events := c.WatchWithin(ctx, "team-a/", first.Revision)
	for _, id := range []string{"team-b/1", "team-a/1", "team-ab/1", "team-a/2"} {
		if _, err := c.Create(ctx, id, project(id, "")); err != nil {
			t.Fatalf("Create(%s): %v", id, err)
		}
	}
	for _, wantID := range []string{"team-a/1", "team-a/2"} {
		if got := nextEvent(t, events); got.Item.ID != wantID {
			t.Errorf("event for %q, want %q", got.Item.ID, wantID)
		}
	}
}

func TestCollection_WatchCompacted(t *testing.T) {
	cl, c := newProjects(t)
	ctx := t.Context()
	old, err := c.Create(ctx, "a", project("a", "v1"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	last, err := c.Update(ctx, "a", project("a", "v2"), "")
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if _, err := cl.Client.Compact(ctx, last.Revision); err != nil {
		t.Fatalf("Compact: %v", err)
	}
	events := c.Watch(ctx, old.Revision)
	e := nextEvent(t, events)
	wantErrIs(t, e.Err, etcdstore.ErrCompacted)
	if _, open := <-events; open {
		t.Error("channel still open after ErrCompacted")
	}

	// The documented recovery: relist, then watch from the list revision + 1.
	items, rev, err := c.ListAll(ctx, "")
	if err != nil || len(items) != 1 {
		t.Fatalf("ListAll = %d items, %v; want 1", len(items), err)
	}
	events = c.Watch(ctx, rev+1)
	next, err := c.Update(ctx, "a", project("a", "v3"), "")
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if got := nextEvent(t, events); got.Err != nil || got.Item.Revision != next.Revision {
		t.Errorf("event after relist = %+v, want the v3 put at %d", got, next.Revision)
	}
}

func TestCollection_WatchEndsWithContext(t *testing.T) {
	_, c := newProjects(t)
	ctx, cancel := context.WithCancel(t.Context())
	events := c.Watch(ctx, 0)
	cancel()
	for e := range events { // must close, with no error event
		if e.Err != nil {
			t.Errorf("error event after cancel: %v", e.Err)
		}
	}
}

// The server restarts (same data, same port) while a watch is open: the
// watch resumes after the last delivered revision, missing nothing written
// while it was down and repeating nothing.
func TestCollection_WatchResumesAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restart waits about 5 s for etcd's graceful stop")
	}
	cl, c := newProjects(t)
	ctx := t.Context()
	before, err := c.Create(ctx, "before", project("before", ""))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	events := c.Watch(ctx, before.Revision)
	if got := nextEvent(t, events); got.Item.ID != "before" {
		t.Fatalf("first event %+v, want before", got)
	}

	cl.Restart(t)
	after, err := c.Create(ctx, "after", project("after", ""))
	if err != nil {
		t.Fatalf("Create after restart: %v", err)
	}
	got := nextEvent(t, events)
	if got.Err != nil || got.Item.ID != "after" || got.Item.Revision != after.Revision {
		t.Errorf("event after restart = %+v, want the put of after at %d", summary(got), after.Revision)
	}
}

func TestCollection_WatchEndsWhenClientCloses(t *testing.T) {
	cl := etcdtest.New(t)
	cli := cl.NewClient(t)
	c := etcdstore.NewCollection(cli, etcdstore.PrefixProjects, newProject)
	events := c.Watch(t.Context(), 1)
	cli.Close()
	e := nextEvent(t, events)
	wantErrIs(t, e.Err, etcdstore.ErrUnavailable)
	if _, open := <-events; open {
		t.Error("channel still open after the client closed")
	}
}
