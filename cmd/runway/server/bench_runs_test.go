package server_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/nodemanager"
)

// The end-to-end benchmark's started/s counts the pods reported RUNNING
// (or SUCCEEDED), never those that FAILED or are still STARTING.
func TestStartedRuns_countsOnlyStartedPods(t *testing.T) {
	cl := etcdtest.New(t)
	states := []workloadv1.PodState{workloadv1.PodState_POD_STATE_RUNNING, workloadv1.PodState_POD_STATE_FAILED,
		workloadv1.PodState_POD_STATE_STARTING, workloadv1.PodState_POD_STATE_SUCCEEDED, workloadv1.PodState_POD_STATE_RUNNING}
	for i, st := range states {
		b, err := proto.Marshal(&nodemanagerv1.ReportWorkloadStateRequest{State: st, Message: "exec: no such file"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Client.Put(t.Context(), nodemanager.RunKey("node-1", "bench", fmt.Sprintf("w-%05d", i), 0), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := startedRuns(t.Context(), cl.Client)
	if err != nil {
		t.Fatal(err)
	}
	if want := nodemanager.RunKey("node-1", "bench", "w-00001", 0) + ": exec: no such file"; r.started != 3 || len(r.failed) != 1 || r.failed[0] != want {
		t.Errorf("started %d, failed %v; want 3 started and %q failed", r.started, r.failed, want)
	}
}
