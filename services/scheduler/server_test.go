package scheduler

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

// serve puts a replica behind a real grpcserver (gRPC and the REST
// gateway on 127.0.0.1:0) and returns a client and the address.
func serve(t *testing.T, r *replica) (schedulerv1.SchedulerServiceClient, string) {
	t.Helper()
	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ShutdownTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(r.Register)
	srv.RegisterGateway(r.RegisterGateway)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient("passthrough:///"+srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return schedulerv1.NewSchedulerServiceClient(conn), srv.Addr()
}

func TestQueries(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	r := startReplica(t, cl, "r1")
	client, addr := serve(t, r)
	ctx := t.Context()
	waitFor(t, 3*time.Second, "a leader", r.leading)
	waitFor(t, 3*time.Second, "team-b's queue", func() bool {
		_, err := client.GetQueue(ctx, &schedulerv1.GetQueueRequest{Name: "projects/team-b/queue"})
		return err == nil
	})

	// Pages of one: default department, team-a, team-b.
	var names []string
	token := ""
	for range 5 {
		resp, err := client.ListQueues(ctx, &schedulerv1.ListQueuesRequest{PageSize: 1, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range resp.GetQueues() {
			names = append(names, q.GetName())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	want := []string{"departments/default/queue", "projects/team-a/queue", "projects/team-b/queue"}
	if len(names) != len(want) || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
		t.Errorf("ListQueues pages: %v, want %v", names, want)
	}

	q, err := client.GetQueue(ctx, &schedulerv1.GetQueueRequest{Name: "projects/team-a/queue"})
	if err != nil {
		t.Fatal(err)
	}
	np := q.GetNodePools()[0]
	if q.GetParentQueue() != "departments/default/queue" || np.GetNodePool() != "nodepools/default" ||
		np.GetDeserved().GetMilliGpus() != 2000 || np.GetFairShare().GetMilliGpus() != 0 {
		t.Errorf("team-a's queue: %v", q)
	}

	for name, tc := range map[string]struct {
		call       func() error
		wantCode   codes.Code
		wantReason string
	}{
		"a project that does not exist": {func() error {
			_, err := client.GetQueue(ctx, &schedulerv1.GetQueueRequest{Name: "projects/nope/queue"})
			return err
		}, codes.NotFound, "PROJECT_NOT_FOUND"},
		"a queue name that is not one": {func() error {
			_, err := client.GetQueue(ctx, &schedulerv1.GetQueueRequest{Name: "projects/team-a"})
			return err
		}, codes.InvalidArgument, "INVALID_FIELD"},
		"a workload that does not exist": {func() error {
			_, err := client.ExplainWorkload(ctx, &schedulerv1.ExplainWorkloadRequest{Name: "projects/team-a/workloads/nope"})
			return err
		}, codes.NotFound, "WORKLOAD_NOT_FOUND"},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.call()
			if apierr.Code(err) != tc.wantCode || apierr.Reason(err) != tc.wantReason {
				t.Errorf("error %v, want %v %s", err, tc.wantCode, tc.wantReason)
			}
		})
	}

	// The REST route of GetLeader, through the gateway.
	httpc := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer httpc.Transport.(*http.Transport).CloseIdleConnections()
	resp, err := httpc.Get("http://" + addr + "/v1/leader")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var leader struct {
		Replica string `json:"replica"`
		IsSelf  bool   `json:"isSelf"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&leader); err != nil || resp.StatusCode != http.StatusOK || leader.Replica != "r1" || !leader.IsSelf {
		t.Errorf("GET /v1/leader: %d %+v %v", resp.StatusCode, leader, err)
	}
}

// TestQueries_FilledFields: the leader's address, a decision's node pool,
// the configured per-resource over-quota weights and ListQueues' filter.
func TestQueries_FilledFields(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	five, three, two := int32(5), int32(3), int32(2)
	put(t, cl.Client, etcdstore.PrefixProjects+"team-w", &quotav1.Project{Name: "projects/team-w", Department: "departments/default",
		NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{OverQuotaWeight: &five},
			Cpu: &quotav1.CpuQuota{OverQuotaWeight: &three}, Memory: &quotav1.MemoryQuota{OverQuotaWeight: &two}}}})
	s, err := New(Config{Replica: "r1", Interval: 200 * time.Millisecond, Debounce: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Deps{Client: cl.NewClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	s.SetAddress("127.0.0.1:7073")
	r := &replica{Server: s}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, 3*time.Second, "a leader", r.leading)

	l, err := s.GetLeader(t.Context(), &schedulerv1.GetLeaderRequest{Name: "leader"})
	if err != nil || l.GetReplica() != "r1" || l.GetAddress() != "127.0.0.1:7073" {
		t.Fatalf("GetLeader: %v, %v; want r1 at 127.0.0.1:7073", l, err)
	}

	training(t, cl.Client, "team-a", "a1", 1, 0)
	training(t, cl.Client, "team-a", "huge", 8, 1)
	for _, id := range []string{"a1", "huge"} {
		waitFor(t, 3*time.Second, id+"'s decision", func() bool {
			ex, err := s.ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{Name: "projects/team-a/workloads/" + id})
			return err == nil && ex.GetLastDecision().GetOutcome() != schedulerv1.DecisionOutcome_DECISION_OUTCOME_NOT_CONSIDERED &&
				ex.GetLastDecision().GetNodePool() == "nodepools/default"
		})
	}

	q, err := s.GetQueue(t.Context(), &schedulerv1.GetQueueRequest{Name: "projects/team-w/queue"})
	if err != nil {
		t.Fatal(err)
	}
	if w := q.GetNodePools()[0].GetOverQuotaWeights(); w.GetGpu() != 5 || w.GetCpu() != 3 || w.GetMemory() != 2 {
		t.Errorf("team-w's weights %v, want gpu 5 cpu 3 memory 2", w)
	}
	if w := mustQueue(t, s, "projects/team-a/queue").GetNodePools()[0].GetOverQuotaWeights(); w.GetGpu() != 1 || w.GetCpu() != 1 || w.GetMemory() != 1 {
		t.Errorf("team-a's weights %v, want 1 each (unset)", w)
	}

	for filter, want := range map[string][]string{
		"kind = PROJECT":    {"projects/team-a/queue", "projects/team-b/queue", "projects/team-w/queue"},
		"kind = DEPARTMENT": {"departments/default/queue"},
		`parent_queue = "departments/default/queue" AND kind = QUEUE_KIND_PROJECT`: {"projects/team-a/queue", "projects/team-b/queue", "projects/team-w/queue"},
		`parent_queue = "departments/nope/queue"`:                                  nil,
	} {
		resp, err := s.ListQueues(t.Context(), &schedulerv1.ListQueuesRequest{Filter: filter})
		if err != nil {
			t.Fatalf("ListQueues(%q): %v", filter, err)
		}
		var got []string
		for _, q := range resp.GetQueues() {
			got = append(got, q.GetName())
		}
		if !slices.Equal(got, want) {
			t.Errorf("ListQueues(%q) = %v, want %v", filter, got, want)
		}
	}
	for _, bad := range []string{"kind = TEAM", "name = x", "kind != PROJECT"} {
		_, err := s.ListQueues(t.Context(), &schedulerv1.ListQueuesRequest{Filter: bad})
		if apierr.Code(err) != codes.InvalidArgument || apierr.Reason(err) != "INVALID_FILTER" {
			t.Errorf("ListQueues(%q): %v, want INVALID_FILTER", bad, err)
		}
	}
}

func mustQueue(t *testing.T, s *Server, name string) *schedulerv1.Queue {
	t.Helper()
	q, err := s.GetQueue(t.Context(), &schedulerv1.GetQueueRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return q
}
