package etcdstore_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/etcdstore"
)

// TestSkipUndecodable: a collection that skips undecodable values lists
// and watches past them, counting each and logging each key once.
func TestSkipUndecodable(t *testing.T) {
	cl, plain := newProjects(t)
	ctx := t.Context()
	mustCreate(t, plain, 2)
	bad := plain.Key("p001x")
	if _, err := cl.Client.Put(ctx, bad, "\xff\xff"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := plain.ListAll(ctx, ""); err == nil {
		t.Fatal("ListAll without SkipUndecodable succeeded on an undecodable value")
	}
	var logs bytes.Buffer
	counted := map[string]int{}
	sl := etcdstore.NewSkipLog(slog.New(slog.NewTextHandler(&logs, nil)), "test", func(prefix string) { counted[prefix]++ })
	c := plain.SkipUndecodable(sl.Report)
	items, rev, err := c.ListAll(ctx, "")
	if err != nil || len(items) != 2 {
		t.Fatalf("ListAll = %d items, %v; want the 2 good ones", len(items), err)
	}
	if _, _, err := c.ListAll(ctx, ""); err != nil {
		t.Fatal(err)
	}
	events := c.Watch(ctx, rev+1)
	if _, err := cl.Client.Put(ctx, plain.Key("p009"), "\xff"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Client.Delete(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "p010", project("p010", "")); err != nil {
		t.Fatal(err)
	}
	if e := nextEvent(t, events); e.Err != nil || e.Type != etcdstore.EventDelete || e.Item.ID != "p001x" {
		t.Fatalf("first event %+v, want the delete of p001x (the bad put skipped)", e)
	}
	if e := nextEvent(t, events); e.Err != nil || e.Item.ID != "p010" {
		t.Fatalf("second event %+v, want the put of p010", e)
	}
	// Skipped: p001x twice (two lists) and on its delete, p009 once.
	if sl.Total() != 4 || counted[etcdstore.PrefixProjects] != 4 {
		t.Errorf("skipped %d, counted %v; want 4 under %s", sl.Total(), counted, etcdstore.PrefixProjects)
	}
	if n := strings.Count(logs.String(), "key="+bad+" "); n != 1 {
		t.Errorf("p001x logged %d times, want once:\n%s", n, logs.String())
	}
}
