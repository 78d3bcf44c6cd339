package scheduler

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/apierr"
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
