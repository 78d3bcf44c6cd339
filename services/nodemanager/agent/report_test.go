package agent

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/nodemanager"
)

// A report older than the pending one of its pod is not stored, but it is
// done once the later one is: its stored func is called then, not dropped.
func TestReporter_olderReportStoredByTheLaterOne(t *testing.T) {
	cl := etcdtest.New(t)
	rp := newReporter(cl.Client, slog.New(slog.NewTextHandler(io.Discard, nil)))
	key := nodemanager.RunKey("node-1", "team-a", "w", 0)
	at := time.Unix(1_700_000_000, 0)
	report := func(s workloadv1.PodState, at time.Time) *nodemanagerv1.ReportWorkloadStateRequest {
		return &nodemanagerv1.ReportWorkloadStateRequest{Node: "nodes/node-1", Workload: "projects/team-a/workloads/w",
			State: s, ObserveTime: timestamppb.New(at)}
	}
	var calls []string
	rp.send(key, report(workloadv1.PodState_POD_STATE_SUCCEEDED, at.Add(time.Second)), func() { calls = append(calls, "later") })
	rp.send(key, report(workloadv1.PodState_POD_STATE_RUNNING, at), func() { calls = append(calls, "older") })
	if !rp.flush(t.Context()) {
		t.Fatal("flush failed")
	}
	if len(calls) != 2 {
		t.Errorf("stored funcs called %v, want both the later and the older report's", calls)
	}
	resp, err := cl.Client.Get(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	got := new(nodemanagerv1.ReportWorkloadStateRequest)
	if len(resp.Kvs) != 1 || proto.Unmarshal(resp.Kvs[0].Value, got) != nil || got.GetState() != workloadv1.PodState_POD_STATE_SUCCEEDED {
		t.Errorf("stored report %v, want the later (SUCCEEDED) one", got)
	}
}
