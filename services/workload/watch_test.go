package workload_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/workload"
)

type watchStream = grpc.ServerStreamingClient[workloadv1.WatchWorkloadsResponse]

// watch opens a stream that the returned cancel (also run at cleanup) ends.
// The deadline bounds a hang; events arrive as soon as they happen.
func (e *env) watch(t *testing.T, req *workloadv1.WatchWorkloadsRequest) (watchStream, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	stream, err := e.client.WatchWorkloads(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return stream, cancel
}

// next receives one event and checks its type and workload name ("" for
// SYNCED).
func next(t *testing.T, stream watchStream, wantType workloadv1.WatchEventType, wantName string) *workloadv1.WatchWorkloadsResponse {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv: %v; want %v %s", err, wantType, wantName)
	}
	if resp.GetType() != wantType || resp.GetWorkload().GetName() != wantName {
		t.Fatalf("event %v %q, want %v %q", resp.GetType(), resp.GetWorkload().GetName(), wantType, wantName)
	}
	if resp.GetResumeToken() == "" {
		t.Errorf("event %v %q has no resume token", resp.GetType(), wantName)
	}
	return resp
}

const (
	added    = workloadv1.WatchEventType_WATCH_EVENT_TYPE_ADDED
	modified = workloadv1.WatchEventType_WATCH_EVENT_TYPE_MODIFIED
	deleted  = workloadv1.WatchEventType_WATCH_EVENT_TYPE_DELETED
	synced   = workloadv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED
)

func name(project, id string) string { return workload.WorkloadName(project, id) }

func TestWatchWorkloads_ListThenChangesInOrder(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a", "team-b")
	ctx := t.Context()
	e.create(t, "team-a", "a0", training())
	e.create(t, "team-b", "b0", training())

	stream, cancel := e.watch(t, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a"})
	next(t, stream, added, name("team-a", "a0"))
	next(t, stream, synced, "")

	a1 := e.create(t, "team-a", "a1", training())
	e.create(t, "team-b", "b1", training()) // another project: not sent
	if _, err := e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: a1.GetName()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.DeleteWorkload(ctx, &workloadv1.DeleteWorkloadRequest{Name: a1.GetName()}); err != nil {
		t.Fatal(err)
	}
	e.create(t, "team-a", "a2", training())

	got := next(t, stream, added, a1.GetName())
	if got.GetWorkload().GetEtag() != a1.GetEtag() {
		t.Errorf("ADDED etag %q, want the created one %q", got.GetWorkload().GetEtag(), a1.GetEtag())
	}
	got = next(t, stream, modified, a1.GetName())
	if got.GetWorkload().GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED {
		t.Errorf("MODIFIED phase %v, want STOPPED", got.GetWorkload().GetStatus().GetPhase())
	}
	got = next(t, stream, deleted, a1.GetName())
	if !got.GetWorkload().GetSpec().GetSuspended() {
		t.Errorf("DELETED carries %v, want the workload's last state (suspended)", got.GetWorkload())
	}
	next(t, stream, added, name("team-a", "a2"))

	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Errorf("Recv after cancel = %v, want Canceled", err)
	}
}

func TestWatchWorkloads_AllProjectsWithFilter(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a", "team-b")
	ctx := t.Context()
	a0 := e.create(t, "team-a", "a0", training())
	e.create(t, "team-b", "b0", training())

	stream, _ := e.watch(t, &workloadv1.WatchWorkloadsRequest{Parent: "projects/-", Filter: "status.phase = PENDING"})
	next(t, stream, added, name("team-a", "a0"))
	next(t, stream, added, name("team-b", "b0"))
	next(t, stream, synced, "")

	if _, err := e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: a0.GetName()}); err != nil {
		t.Fatal(err)
	}
	got := next(t, stream, deleted, a0.GetName()) // no longer matches
	if got.GetWorkload().GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED {
		t.Errorf("DELETED for leaving the filter carries phase %v, want the new state (STOPPED)", got.GetWorkload().GetStatus().GetPhase())
	}
	stopped := training()
	stopped.Spec.Suspended = true
	b1 := e.create(t, "team-b", "b1", stopped) // never matches: not sent
	if _, err := e.client.DeleteWorkload(ctx, &workloadv1.DeleteWorkloadRequest{Name: b1.GetName()}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.ResumeWorkload(ctx, &workloadv1.ResumeWorkloadRequest{Name: a0.GetName()}); err != nil {
		t.Fatal(err)
	}
	next(t, stream, added, a0.GetName()) // matches again
	e.create(t, "team-b", "b2", training())
	next(t, stream, added, name("team-b", "b2"))
}

func TestWatchWorkloads_Resume(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	ctx := t.Context()
	e.create(t, "team-a", "a0", training())

	stream, cancel := e.watch(t, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a"})
	next(t, stream, added, name("team-a", "a0"))
	sync := next(t, stream, synced, "")
	a1 := e.create(t, "team-a", "a1", training())
	afterA1 := next(t, stream, added, a1.GetName())
	cancel()

	e.create(t, "team-a", "a2", training())
	if _, err := e.client.SuspendWorkload(ctx, &workloadv1.SuspendWorkloadRequest{Name: a1.GetName()}); err != nil {
		t.Fatal(err)
	}

	t.Run("after an event", func(t *testing.T) {
		stream, _ := e.watch(t, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a", ResumeToken: afterA1.GetResumeToken()})
		next(t, stream, synced, "")
		next(t, stream, added, name("team-a", "a2"))
		next(t, stream, modified, a1.GetName())
	})
	t.Run("after the listing", func(t *testing.T) {
		stream, _ := e.watch(t, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a", ResumeToken: sync.GetResumeToken()})
		next(t, stream, synced, "")
		next(t, stream, added, a1.GetName())
		next(t, stream, added, name("team-a", "a2"))
		next(t, stream, modified, a1.GetName())
	})
	t.Run("inside one transaction that changed two workloads", func(t *testing.T) {
		stream, _ := e.watch(t, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a"})
		for range 3 {
			if _, err := stream.Recv(); err != nil { // a0, a1, a2
				t.Fatal(err)
			}
		}
		next(t, stream, synced, "")
		coll := etcdstore.NewCollection(e.etcd.Client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
		batch := etcdstore.NewBatch(e.etcd.Client)
		for _, id := range []string{"a0", "a2"} {
			it, err := coll.Get(ctx, "team-a/"+id)
			if err != nil {
				t.Fatal(err)
			}
			it.Msg.Status.PreemptionCount = 7
			batch.PutIf(coll.Key("team-a/"+id), it.Msg, it.Revision)
		}
		if _, err := batch.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		first := next(t, stream, modified, name("team-a", "a0"))
		next(t, stream, modified, name("team-a", "a2"))

		resumed, _ := e.watch(t, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a", ResumeToken: first.GetResumeToken()})
		next(t, resumed, synced, "")
		got := next(t, resumed, modified, name("team-a", "a2"))
		if got.GetWorkload().GetStatus().GetPreemptionCount() != 7 {
			t.Errorf("preemption_count %d, want 7", got.GetWorkload().GetStatus().GetPreemptionCount())
		}
	})
}

func TestWatchWorkloads_Errors(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	ctx := t.Context()
	e.create(t, "team-a", "a0", training())
	stream, cancel := e.watch(t, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a"})
	next(t, stream, added, name("team-a", "a0"))
	old := next(t, stream, synced, "")
	cancel()
	e.create(t, "team-a", "a1", training())
	e.create(t, "team-a", "a2", training())
	resp, err := e.etcd.Client.Get(ctx, "compact-to-here")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.etcd.Client.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}

	for name, tc := range map[string]struct {
		req        *workloadv1.WatchWorkloadsRequest
		wantCode   codes.Code
		wantReason string
	}{
		"a token older than the compacted history": {
			&workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a", ResumeToken: old.GetResumeToken()},
			codes.FailedPrecondition, "RESUME_TOKEN_EXPIRED"},
		"a token that is not a token": {
			&workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a", ResumeToken: "yesterday"},
			codes.InvalidArgument, "INVALID_FIELD"},
		"a token from the future": {
			&workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a", ResumeToken: "999999.0"},
			codes.InvalidArgument, "INVALID_FIELD"},
		"a project that does not exist": {
			&workloadv1.WatchWorkloadsRequest{Parent: "projects/nope"}, codes.NotFound, "PROJECT_NOT_FOUND"},
		"a parent that is not a project": {
			&workloadv1.WatchWorkloadsRequest{Parent: "team-a"}, codes.InvalidArgument, "INVALID_FIELD"},
		"a filter that does not parse": {
			&workloadv1.WatchWorkloadsRequest{Parent: "projects/-", Filter: "status.phase = "}, codes.InvalidArgument, "INVALID_FILTER"},
	} {
		t.Run(name, func(t *testing.T) {
			stream, _ := e.watch(t, tc.req)
			_, err := stream.Recv()
			wantError(t, err, tc.wantCode, tc.wantReason)
		})
	}
}
