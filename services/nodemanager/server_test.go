package nodemanager_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/nodemanager"
)

func TestNode_registersAndLists(t *testing.T) {
	e := start(t)
	e.startAgent(t, "node-1", map[string]string{"type": "dgx"})
	e.startAgent(t, "node-2", nil)
	n := e.registered(t, "node-1")
	e.registered(t, "node-2")

	if n.GetNodePool() != "nodepools/default" || n.GetReadiness() != nodemanagerv1.Readiness_READINESS_READY ||
		n.GetUid() == "" || n.GetEtag() == "" || n.GetLabels()["type"] != "dgx" || len(n.GetDevices()) != 2 {
		t.Errorf("node-1 = %v", n)
	}
	if c := n.GetCapacity(); c.GetMilliGpus() != 2000 || c.GetMilliCpu() != 8000 || c.GetMemoryBytes() != 64<<30 {
		t.Errorf("capacity = %v, want 2 GPUs, 8 CPUs, 64 GiB", c)
	}
	if !proto.Equal(n.GetAllocatable(), n.GetCapacity()) {
		t.Errorf("allocatable %v != capacity %v", n.GetAllocatable(), n.GetCapacity())
	}

	ctx := context.Background()
	first, err := e.client.ListNodes(ctx, &nodemanagerv1.ListNodesRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.GetNodes()) != 1 || first.GetNodes()[0].GetName() != "nodes/node-1" || first.GetNextPageToken() == "" {
		t.Fatalf("first page = %v", first)
	}
	second, err := e.client.ListNodes(ctx, &nodemanagerv1.ListNodesRequest{PageSize: 1, PageToken: first.GetNextPageToken()})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.GetNodes()) != 1 || second.GetNodes()[0].GetName() != "nodes/node-2" || second.GetNextPageToken() != "" {
		t.Fatalf("second page = %v", second)
	}

	for filter, want := range map[string]int{
		`labels.type = "dgx"`:                              1,
		`readiness = READY AND drained = false`:            2,
		`node_pool = "nodepools/default"`:                  2,
		`node_pool = "nodepools/a100" AND drained = false`: 0,
	} {
		got, err := e.client.ListNodes(ctx, &nodemanagerv1.ListNodesRequest{Filter: filter})
		if err != nil {
			t.Fatalf("filter %q: %v", filter, err)
		}
		if len(got.GetNodes()) != want {
			t.Errorf("filter %q: %d nodes, want %d", filter, len(got.GetNodes()), want)
		}
	}
	_, err = e.client.ListNodes(ctx, &nodemanagerv1.ListNodesRequest{Filter: "uid = x"})
	wantError(t, err, codes.InvalidArgument, "INVALID_FILTER")
	_, err = e.client.ListNodes(ctx, &nodemanagerv1.ListNodesRequest{PageToken: "garbage"})
	wantError(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN")
	_, err = e.client.GetNode(ctx, &nodemanagerv1.GetNodeRequest{Name: "nodes/node-3"})
	wantError(t, err, codes.NotFound, "NODE_NOT_FOUND")
	_, err = e.client.GetNode(ctx, &nodemanagerv1.GetNodeRequest{Name: "node-1"})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
}

func TestNode_expiresWhenAgentKilled(t *testing.T) {
	e := start(t)
	a := e.startAgent(t, "node-1", nil)
	e.registered(t, "node-1")
	a.kill(t)
	e.gone(t, "node-1")
	resp, err := e.etcd.Client.Get(context.Background(), etcdstore.PrefixLeases+"node-1")
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("lease key after expiry: %v, %v", resp.Kvs, err)
	}
}

func TestDrain_survivesReregistration(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	a := e.startAgent(t, "node-1", nil)
	before := e.registered(t, "node-1")

	_, err := e.client.DrainNode(ctx, &nodemanagerv1.DrainNodeRequest{Name: "nodes/node-1", Etag: "1"})
	wantError(t, err, codes.Aborted, "ETAG_MISMATCH")
	_, err = e.client.DrainNode(ctx, &nodemanagerv1.DrainNodeRequest{Name: "nodes/node-9"})
	wantError(t, err, codes.NotFound, "NODE_NOT_FOUND")

	drained, err := e.client.DrainNode(ctx, &nodemanagerv1.DrainNodeRequest{Name: "nodes/node-1", Reason: "maintenance", Etag: before.GetEtag()})
	if err != nil {
		t.Fatal(err)
	}
	if !drained.GetDrained() || drained.GetDrainReason() != "maintenance" || drained.GetEtag() == before.GetEtag() {
		t.Errorf("DrainNode = %v", drained)
	}
	// Readers of the node key alone (the quota service) see the drain.
	stored, lease := e.storedNode(t, "node-1")
	if !stored.GetDrained() {
		t.Errorf("stored node drained = %v, want true", stored.GetDrained())
	}
	if lease == 0 {
		t.Error("DrainNode dropped the node key's lease")
	}

	a.kill(t)
	e.gone(t, "node-1")
	e.startAgent(t, "node-1", nil)
	after := e.registered(t, "node-1")
	if !after.GetDrained() || after.GetDrainReason() != "maintenance" {
		t.Errorf("re-registered node drained = %v %q, want true maintenance", after.GetDrained(), after.GetDrainReason())
	}
	if after.GetUid() == before.GetUid() {
		t.Error("re-registered node kept its uid")
	}

	undrained, err := e.client.UndrainNode(ctx, &nodemanagerv1.UndrainNodeRequest{Name: "nodes/node-1"})
	if err != nil {
		t.Fatal(err)
	}
	if undrained.GetDrained() || undrained.GetDrainReason() != "" {
		t.Errorf("UndrainNode = %v", undrained)
	}
	again, err := e.client.UndrainNode(ctx, &nodemanagerv1.UndrainNodeRequest{Name: "nodes/node-1"})
	if err != nil || again.GetDrained() {
		t.Errorf("second UndrainNode = %v, %v", again, err)
	}
	if resp, _ := e.etcd.Client.Get(ctx, etcdstore.PrefixDrains+"node-1"); len(resp.Kvs) != 0 {
		t.Error("drain key left after UndrainNode")
	}
}

func TestReportWorkloadState(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	now := time.Now()
	report := func(state workloadv1.PodState, at time.Time) *nodemanagerv1.ReportWorkloadStateRequest {
		return &nodemanagerv1.ReportWorkloadStateRequest{
			Node: "nodes/node-1", Workload: "projects/team-a/workloads/train-1", PodIndex: 0,
			State: state, ObserveTime: timestamppb.New(at),
		}
	}
	_, err := e.client.ReportWorkloadState(ctx, report(workloadv1.PodState_POD_STATE_RUNNING, now))
	wantError(t, err, codes.FailedPrecondition, "WORKLOAD_NOT_BOUND")
	_, err = e.client.ReportWorkloadState(ctx, &nodemanagerv1.ReportWorkloadStateRequest{Node: "nodes/node-1"})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")

	bound, _ := proto.Marshal(&workloadv1.PodStatus{Index: 0, Node: "nodes/node-1", State: workloadv1.PodState_POD_STATE_BOUND})
	if _, err := e.etcd.Client.Put(ctx, nodemanager.BindingKey("node-1", "team-a", "train-1", 0), string(bound)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.ReportWorkloadState(ctx, report(workloadv1.PodState_POD_STATE_SUCCEEDED, now)); err != nil {
		t.Fatal(err)
	}
	// An older report is accepted and ignored.
	if _, err := e.client.ReportWorkloadState(ctx, report(workloadv1.PodState_POD_STATE_RUNNING, now.Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	resp, err := e.etcd.Client.Get(ctx, nodemanager.RunKey("node-1", "team-a", "train-1", 0))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("run key: %v %v", resp, err)
	}
	got := new(nodemanagerv1.ReportWorkloadStateRequest)
	if err := proto.Unmarshal(resp.Kvs[0].Value, got); err != nil || got.GetState() != workloadv1.PodState_POD_STATE_SUCCEEDED {
		t.Errorf("stored report = %v (%v), want SUCCEEDED", got, err)
	}
	r := report(workloadv1.PodState_POD_STATE_RUNNING, now)
	r.PodIndex = 1
	_, err = e.client.ReportWorkloadState(ctx, r)
	wantError(t, err, codes.FailedPrecondition, "WORKLOAD_NOT_BOUND")
}

func TestGetTimeSlicePlan(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	e.startAgent(t, "node-1", nil)
	e.registered(t, "node-1")
	plan, err := e.client.GetTimeSlicePlan(ctx, &nodemanagerv1.GetTimeSlicePlanRequest{Name: "nodes/node-1/timeSlicePlan"})
	if err != nil {
		t.Fatal(err)
	}
	if plan.GetName() != "nodes/node-1/timeSlicePlan" || len(plan.GetDevices()) != 0 || plan.GetRevision() != 0 {
		t.Errorf("plan = %v, want the empty plan", plan)
	}
	_, err = e.client.GetTimeSlicePlan(ctx, &nodemanagerv1.GetTimeSlicePlanRequest{Name: "nodes/node-2/timeSlicePlan"})
	wantError(t, err, codes.NotFound, "NODE_NOT_FOUND")
	_, err = e.client.GetTimeSlicePlan(ctx, &nodemanagerv1.GetTimeSlicePlanRequest{Name: "nodes/node-1"})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
}

// The heartbeat time follows the lease's renewals: it moves while the
// agent keeps its lease alive, though nothing rewrites the node key.
func TestNode_heartbeatFollowsLease(t *testing.T) {
	e := start(t)
	e.startAgent(t, "node-1", nil)
	first := e.registered(t, "node-1")
	time.Sleep(2500 * time.Millisecond) // a few renewals of the 1 s lease
	n, err := e.client.GetNode(t.Context(), &nodemanagerv1.GetNodeRequest{Name: "nodes/node-1"})
	if err != nil {
		t.Fatal(err)
	}
	if n.GetUid() != first.GetUid() {
		t.Fatalf("the node registered again (uid %s, was %s)", n.GetUid(), first.GetUid())
	}
	if d := n.GetHeartbeatTime().AsTime().Sub(n.GetCreateTime().AsTime()); d < 1500*time.Millisecond {
		t.Errorf("heartbeat %v after registration, want at least 1.5 s later", d)
	}
	list, err := e.client.ListNodes(t.Context(), &nodemanagerv1.ListNodesRequest{})
	if err != nil || len(list.GetNodes()) != 1 || list.GetNodes()[0].GetHeartbeatTime().AsTime().Before(n.GetHeartbeatTime().AsTime().Add(-time.Second)) {
		t.Errorf("ListNodes heartbeat %v, GetNode's %v (%v)", list.GetNodes(), n.GetHeartbeatTime(), err)
	}
}
