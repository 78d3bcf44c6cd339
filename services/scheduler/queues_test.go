package scheduler

import (
	"encoding/base64"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// A ListQueues page token resumes after the last queue listed, whether
// that queue, or the one that would have come next, was deleted since.
func TestListQueues_tokenSurvivesDeletes(t *testing.T) {
	cl := etcdtest.New(t)
	for _, p := range []string{"p1", "p2", "p3", "p4"} {
		project(t, cl.Client, p, 1)
	}
	r := startReplica(t, cl, "r1")
	list := func(size int32, token string) ([]string, string) {
		resp, err := r.ListQueues(t.Context(), &schedulerv1.ListQueuesRequest{PageSize: size, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range resp.GetQueues() {
			names = append(names, q.GetName())
		}
		return names, resp.GetNextPageToken()
	}
	waitFor(t, 5*time.Second, "five queues", func() bool {
		r.cache.mu.Lock()
		ready := r.cache.ready
		r.cache.mu.Unlock()
		if !ready {
			return false
		}
		names, _ := list(0, "")
		return len(names) == 5
	})
	first, token := list(2, "")
	if want := []string{"departments/default/queue", "projects/p1/queue"}; !cmp.Equal(first, want) || token == "" {
		t.Fatalf("first page %v (token %q), want %v and a token", first, token, want)
	}
	for _, p := range []string{"p1", "p2"} { // the last listed, and the next one
		if _, err := cl.Client.Delete(t.Context(), etcdstore.PrefixProjects+p); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, "p1 and p2 gone", func() bool {
		names, _ := list(0, "")
		return !slices.Contains(names, "projects/p1/queue") && !slices.Contains(names, "projects/p2/queue")
	})
	next, token := list(2, token)
	if want := []string{"projects/p3/queue", "projects/p4/queue"}; !cmp.Equal(next, want) || token != "" {
		t.Errorf("after the deletes the next page is %v (token %q), want %v and no token", next, token, want)
	}
	// A token is the server's own: anything else is refused.
	for _, bad := range []string{"garbage!", base64.RawURLEncoding.EncodeToString([]byte("projects/p3/queue")),
		base64.RawURLEncoding.EncodeToString([]byte("x/default//")), base64.RawURLEncoding.EncodeToString([]byte("0/default/0/P3"))} {
		if _, err := r.ListQueues(t.Context(), &schedulerv1.ListQueuesRequest{PageToken: bad}); err == nil {
			t.Errorf("page token %q accepted", bad)
		}
	}
}
