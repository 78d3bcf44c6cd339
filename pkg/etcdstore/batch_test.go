package etcdstore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/etcdstore"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func TestBatch_CommitsAtomically(t *testing.T) {
	cl, c := newProjects(t)
	ctx := t.Context()
	mustCreate(t, c, 2)
	p0, _ := c.Get(ctx, "p000")
	p1, _ := c.Get(ctx, "p001")

	rev, err := etcdstore.NewBatch(cl.Client).
		PutIf(c.Key("new"), project("new", ""), 0).
		PutIf(c.Key("p000"), project("p000", "changed"), p0.Revision).
		DeleteIf(c.Key("p001"), p1.Revision).
		Commit(ctx)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	items, listRev, err := c.ListAll(ctx, "")
	if err != nil {
		t.Fatalf("ListAll: %v", err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.ID+"="+it.Msg.GetDescription())
		if it.Revision != rev {
			t.Errorf("%s at revision %d, want the batch's %d", it.ID, it.Revision, rev)
		}
	}
	if d := diffProto([]string{"new=", "p000=changed"}, got); d != "" {
		t.Errorf("after commit (-want +got):\n%s", d)
	}
	if listRev != rev {
		t.Errorf("store revision %d after one batch, want %d (one Txn)", listRev, rev)
	}
}

func TestBatch_ConflictWritesNothing(t *testing.T) {
	cl, c := newProjects(t)
	ctx := t.Context()
	mustCreate(t, c, 2)
	p0, _ := c.Get(ctx, "p000")
	if _, err := c.Update(ctx, "p000", project("p000", "someone else"), ""); err != nil {
		t.Fatalf("Update: %v", err)
	}
	_, err := etcdstore.NewBatch(cl.Client).
		PutIf(c.Key("new"), project("new", ""), 0).
		PutIf(c.Key("p000"), project("p000", "mine"), p0.Revision). // stale
		PutIf(c.Key("p001"), project("p001", "mine"), 0).           // exists
		Commit(ctx)
	var ce *etcdstore.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, etcdstore.ErrConflict) {
		t.Fatalf("Commit = %v, want *ConflictError", err)
	}
	if len(ce.Failed) != 2 || !strings.Contains(ce.Failed[0], "p000") || !strings.Contains(ce.Failed[1], "p001: exists") {
		t.Errorf("Failed = %q, want the stale p000 and the existing p001", ce.Failed)
	}
	if _, err := c.Get(ctx, "new"); !errors.Is(err, etcdstore.ErrNotFound) {
		t.Errorf("rejected batch wrote new: Get = %v", err)
	}
	got, _ := c.Get(ctx, "p000")
	if got.Msg.GetDescription() != "someone else" {
		t.Errorf("rejected batch changed p000 to %q", got.Msg.GetDescription())
	}
}

// The scheduler's fence: a plan committed under a leadership that has since
// passed to another candidate is rejected, even with no other conflict.
func TestBatch_FenceRejectsDeposedLeader(t *testing.T) {
	cl, c := newProjects(t)
	ctx := t.Context()
	campaign := func(name string) (*concurrency.Session, *concurrency.Election) {
		s, err := concurrency.NewSession(cl.NewClient(t), concurrency.WithTTL(5))
		if err != nil {
			t.Fatalf("NewSession: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		e := concurrency.NewElection(s, etcdstore.PrefixElectionScheduler)
		if err := e.Campaign(ctx, name); err != nil {
			t.Fatalf("Campaign(%s): %v", name, err)
		}
		return s, e
	}
	s1, e1 := campaign("s1")
	key, rev := e1.Key(), e1.Rev()

	if _, err := etcdstore.NewBatch(cl.Client).Fence(key, rev).Put(c.Key("b1"), project("b1", "")).Commit(ctx); err != nil {
		t.Fatalf("leader's fenced Commit: %v", err)
	}

	// s1 loses its session (as when its lease expires); s2 takes over.
	if err := s1.Close(); err != nil {
		t.Fatalf("close s1: %v", err)
	}
	_, e2 := campaign("s2")

	for _, tc := range []struct {
		name     string
		fenceKey string
		fenceRev int64
		wantText string
	}{
		{"the old leader's key is gone", key, rev, "key is gone"},
		{"a wrong create revision for the live key", e2.Key(), e2.Rev() + 1, fmt.Sprintf("create revision %d, want %d", e2.Rev(), e2.Rev()+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := etcdstore.NewBatch(cl.Client).Fence(tc.fenceKey, tc.fenceRev).Put(c.Key("b2"), project("b2", "")).Commit(ctx)
			wantErrIs(t, err, etcdstore.ErrConflict)
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not say %q", err, tc.wantText)
			}
			if _, err := c.Get(ctx, "b2"); !errors.Is(err, etcdstore.ErrNotFound) {
				t.Errorf("fenced-out batch wrote b2: Get = %v", err)
			}
		})
	}
	if _, err := etcdstore.NewBatch(cl.Client).Fence(e2.Key(), e2.Rev()).Put(c.Key("b2"), project("b2", "")).Commit(ctx); err != nil {
		t.Fatalf("new leader's fenced Commit: %v", err)
	}
}

func TestBatch_Rejected(t *testing.T) {
	cl, c := newProjects(t)
	ctx := t.Context()
	tests := []struct {
		name    string
		batch   func() *etcdstore.Batch
		wantErr error
	}{
		{"more writes than MaxOps", func() *etcdstore.Batch {
			b := etcdstore.NewBatch(cl.Client)
			for i := range etcdstore.DefaultMaxOps + 1 {
				b.Put(c.Key(fmt.Sprintf("p%03d", i)), project("p", ""))
			}
			return b
		}, etcdstore.ErrBatchTooLarge},
		{"more conditions than a lowered MaxOps", func() *etcdstore.Batch {
			b := etcdstore.NewBatch(cl.Client)
			b.MaxOps = 2
			return b.PutIf(c.Key("p000"), project("p", ""), 0).PutIf(c.Key("p001"), project("p", ""), 0).Check(c.Key("p002"), 0)
		}, etcdstore.ErrBatchTooLarge},
		{"the same key written twice", func() *etcdstore.Batch {
			return etcdstore.NewBatch(cl.Client).Put(c.Key("p000"), project("p", "")).Delete(c.Key("p000"))
		}, etcdstore.ErrInvalidArgument},
		{"a fence on revision zero", func() *etcdstore.Batch {
			return etcdstore.NewBatch(cl.Client).Fence(etcdstore.PrefixElectionScheduler+"/x", 0).Put(c.Key("p000"), project("p", ""))
		}, etcdstore.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.batch().Commit(ctx)
			wantErrIs(t, err, tc.wantErr)
			page, lerr := c.List(ctx, "", 0, "")
			if lerr != nil || len(page.Items) != 0 {
				t.Errorf("rejected batch left %d items (%v), want none", len(page.Items), lerr)
			}
		})
	}
	// Exactly MaxOps writes is accepted: the limit is inclusive.
	b := etcdstore.NewBatch(cl.Client)
	for i := range etcdstore.DefaultMaxOps {
		b.PutIf(c.Key(fmt.Sprintf("p%03d", i)), project("p", ""), 0)
	}
	if _, err := b.Commit(ctx); err != nil {
		t.Fatalf("Commit of %d creates: %v", etcdstore.DefaultMaxOps, err)
	}
}
