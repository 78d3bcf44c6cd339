package workload

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

func gcWorkload(id string) *workloadv1.Workload {
	return &workloadv1.Workload{Name: WorkloadName("team-a", id), Uid: newUID(), Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING}
}

// gcStore is a store on c with the project team-a, as the quota service
// writes it.
func gcStore(t testing.TB, c *etcdtest.Cluster) *store {
	t.Helper()
	if _, err := c.Client.Put(context.Background(), etcdstore.PrefixProjects+"team-a", ""); err != nil {
		t.Fatal(err)
	}
	return newStore(c.Client)
}

// TestGroupCommit_oneBatch holds the committer's role while creates queue
// up, so that they are all in one batch: distinct new ids, a duplicate id
// within the batch and an id stored before. The batch's Txn fails (the old
// key exists) and every create is done again alone: the new ids are
// created, the stored id and the second create of the duplicate get
// ErrAlreadyExists, and each caller gets its own answer and etag.
func TestGroupCommit_oneBatch(t *testing.T) {
	c := etcdtest.New(t)
	s := gcStore(t, c)
	ctx := context.Background()
	if _, err := s.create(ctx, "team-a", "old", gcWorkload("old")); err != nil {
		t.Fatal(err)
	}
	s.group.mu.Lock()
	s.group.flushing = true // nobody commits until released below
	s.group.mu.Unlock()

	ids := []string{"a", "dup", "b", "old", "dup", "c"}
	type result struct {
		w   *workloadv1.Workload
		err error
	}
	results := make([]result, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			w, err := s.create(ctx, "team-a", id, gcWorkload(id))
			results[i] = result{w, err}
		})
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.group.mu.Lock()
		n := len(s.group.queue)
		if n == len(ids) {
			next := s.group.queue[0]
			next.promoted = true
			close(next.lead)
			s.group.mu.Unlock()
			break
		}
		s.group.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d creates queued", n, len(ids))
		}
	}
	wg.Wait()

	created, exists := map[string]int{}, map[string]int{}
	for i, r := range results {
		switch {
		case r.err == nil:
			created[ids[i]]++
			got, err := s.get(ctx, "team-a", ids[i])
			if err != nil {
				t.Fatal(err)
			}
			if got.GetEtag() != r.w.GetEtag() || r.w.GetName() != WorkloadName("team-a", ids[i]) {
				t.Errorf("create %s returned %s etag %s, stored etag %s", ids[i], r.w.GetName(), r.w.GetEtag(), got.GetEtag())
			}
		case errors.Is(r.err, etcdstore.ErrAlreadyExists):
			exists[ids[i]]++
		default:
			t.Errorf("create %s: %v", ids[i], r.err)
		}
	}
	want := fmt.Sprint(map[string]int{"a": 1, "b": 1, "c": 1, "dup": 1}, map[string]int{"dup": 1, "old": 1})
	if got := fmt.Sprint(created, exists); got != want {
		t.Errorf("created, already existing = %s, want %s", got, want)
	}
	if s.group.flushing || len(s.group.queue) != 0 {
		t.Errorf("committer left flushing=%v with %d queued", s.group.flushing, len(s.group.queue))
	}
}

// TestGroupCommit_concurrent: many concurrent creates of new ids, each id
// created twice, and of an id stored before. Every new id is created once;
// the other creates get ErrAlreadyExists; what is stored is what the
// successful creates returned, with their etags.
func TestGroupCommit_concurrent(t *testing.T) {
	c := etcdtest.New(t)
	s := gcStore(t, c)
	ctx := context.Background()
	if _, err := s.create(ctx, "team-a", "old", gcWorkload("old")); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var mu sync.Mutex
	created, exists := map[string]int{}, map[string]int{}
	var wg sync.WaitGroup
	for i := range 2 * n {
		id := fmt.Sprintf("w-%03d", i%n)
		if i%50 == 0 {
			id = "old"
		}
		wg.Go(func() {
			w, err := s.create(ctx, "team-a", id, gcWorkload(id))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created[id]++
				got, gerr := s.get(ctx, "team-a", id)
				if gerr != nil || got.GetEtag() != w.GetEtag() {
					t.Errorf("create %s returned etag %s, stored %v (%v)", id, w.GetEtag(), got.GetEtag(), gerr)
				}
			case errors.Is(err, etcdstore.ErrAlreadyExists):
				exists[id]++
			default:
				t.Errorf("create %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	if created["old"] != 0 {
		t.Errorf("old created %d times", created["old"])
	}
	for i := range n {
		id := fmt.Sprintf("w-%03d", i)
		if i%50 == 0 {
			continue // "old" took its place in both rounds
		}
		if created[id] != 1 || exists[id] != 1 {
			t.Errorf("%s: created %d, already existing %d; want 1 and 1", id, created[id], exists[id])
		}
	}
	items, _, err := s.listAll(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if want := n - n/50 + 1; len(items) != want {
		t.Errorf("%d workloads stored, want %d", len(items), want)
	}
}

// TestGroupCommit_lostReply: a batch commits but its reply is lost; the
// caller gets its own stored workload (same uid), not AlreadyExists.
func TestGroupCommit_lostReply(t *testing.T) {
	c := etcdtest.New(t)
	s := gcStore(t, c)
	var lost atomic.Bool
	lost.Store(true)
	s.group.lostReply = func() bool { return lost.Swap(false) }
	w := gcWorkload("a")
	got, err := s.create(t.Context(), "team-a", "a", w)
	if err != nil {
		t.Fatalf("create whose batch reply was lost: %v, want the stored workload", err)
	}
	if lost.Load() {
		t.Fatal("the batch was not committed through the committer")
	}
	stored, err := s.get(t.Context(), "team-a", "a")
	if err != nil {
		t.Fatal(err)
	}
	if got.GetUid() != w.GetUid() || stored.GetUid() != w.GetUid() || got.GetEtag() != stored.GetEtag() {
		t.Errorf("returned uid %s etag %s, stored uid %s etag %s, want uid %s", got.GetUid(), got.GetEtag(), stored.GetUid(), stored.GetEtag(), w.GetUid())
	}
	// Another caller's create of the same name still gets AlreadyExists.
	if _, err := s.create(t.Context(), "team-a", "a", gcWorkload("a")); !errors.Is(err, etcdstore.ErrAlreadyExists) {
		t.Errorf("second create of a: %v, want ErrAlreadyExists", err)
	}
}

// TestCreate_projectDeletedMeanwhile: a create queued while its project is
// deleted is not written (no orphan), in a batch or alone.
func TestCreate_projectDeletedMeanwhile(t *testing.T) {
	c := etcdtest.New(t)
	s := gcStore(t, c)
	ctx := t.Context()
	s.group.mu.Lock()
	s.group.flushing = true // hold the batch until the project is gone
	s.group.mu.Unlock()
	errs := make(chan error, 2)
	for _, id := range []string{"a", "b"} {
		go func() {
			_, err := s.create(ctx, "team-a", id, gcWorkload(id))
			errs <- err
		}()
	}
	waitQueued(t, s, 2)
	before, err := c.Client.Get(ctx, etcdstore.PrefixProjects+"team-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.Delete(ctx, etcdstore.PrefixProjects+"team-a"); err != nil {
		t.Fatal(err)
	}
	s.group.mu.Lock()
	next := s.group.queue[0]
	next.promoted = true
	close(next.lead)
	s.group.mu.Unlock()
	for range 2 {
		if err := <-errs; !errors.Is(err, errProjectGone) {
			t.Errorf("create in a deleted project: %v, want errProjectGone", err)
		}
	}
	resp, err := c.Client.Get(ctx, etcdstore.PrefixWorkloads, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("%d workloads stored (%v), want none", resp.Count, err)
	}
	// Created again, the project is a new one: a create read against the
	// old one still fails.
	if _, err := c.Client.Put(ctx, etcdstore.PrefixProjects+"team-a", ""); err != nil {
		t.Fatal(err)
	}
	old := projectRef{key: etcdstore.PrefixProjects + "team-a", rev: before.Kvs[0].CreateRevision}
	if _, err := s.groupCreate(ctx, "team-a/c", gcWorkload("c"), old); !errors.Is(err, errProjectGone) {
		t.Errorf("create checked against the deleted incarnation: %v, want errProjectGone", err)
	}
}

func waitQueued(t *testing.T, s *store, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.group.mu.Lock()
		got := len(s.group.queue)
		s.group.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d creates queued", got, n)
		}
	}
}

// BenchmarkStoreCreate compares one Txn per create (Collection.Create) with
// the group committer, from 32 concurrent callers, on an embedded etcd with
// fsync on (etcd's production setting, as in `runway dev`).
func BenchmarkStoreCreate(b *testing.B) {
	for _, mode := range []string{"single", "group"} {
		b.Run(mode, func(b *testing.B) {
			c := etcdtest.New(b, etcdtest.WithConfig(func(cfg *embed.Config) { cfg.UnsafeNoFsync = false }))
			s := gcStore(b, c)
			var next atomic.Int64
			b.SetParallelism((32 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("w-%07d", next.Add(1))
					w := gcWorkload(id)
					var err error
					if mode == "single" {
						_, err = s.coll.Create(context.Background(), "team-a/"+id, w)
					} else {
						_, err = s.create(context.Background(), "team-a", id, w)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
		})
	}
}
