package agent_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/nodemanager"
)

// TestRun_bindingRewrittenRestartsPod: a consolidation move to other
// devices of the same node rewrites the pod's binding. The agent stops the
// pod, starts it again on the new device once the old process has exited
// (they share a pod id), and reports no STOPPED in between: the run key is
// the new placement's, and a STOPPED there would read as the moved pod's.
func TestRun_bindingRewrittenRestartsPod(t *testing.T) {
	f := newFixture(t)
	f.run(t)
	led := ledger(t)
	f.workload(t, "moved", "sh", "-c", `echo "$CUDA_VISIBLE_DEVICES $$" >> `+led+`; exec sleep 60`)
	f.bind(t, "moved")
	f.waitRun(t, "moved", workloadv1.PodState_POD_STATE_RUNNING)
	runs := func() []string {
		b, _ := os.ReadFile(led)
		return strings.Fields(string(b))
	}
	eventually(t, "the pod on device 1", func() bool { return len(runs()) == 2 })
	first, _ := strconv.Atoi(runs()[1])

	resp, err := f.etcd.Client.Get(context.Background(), nodemanager.RunKey("node-1", "team-a", "moved", 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reports := f.etcd.Client.Watch(ctx, nodemanager.RunKey("node-1", "team-a", "moved", 0), clientv3.WithRev(resp.Header.Revision+1))
	f.bindShare(t, "moved", 2, 1000)

	eventually(t, "the pod started again on device 2", func() bool { return len(runs()) >= 4 })
	if got := runs(); len(got) != 4 || got[0] != "1" || got[2] != "2" {
		t.Fatalf("runs %v, want device 1, then device 2", got)
	}
	if alive(first) {
		t.Errorf("the first run (pid %d) still lives beside the second", first)
	}
	var states []string
	for !slices.Contains(states, workloadv1.PodState_POD_STATE_RUNNING.String()) {
		wr := <-reports
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			r := new(nodemanagerv1.ReportWorkloadStateRequest)
			if err := proto.Unmarshal(ev.Kv.Value, r); err != nil {
				t.Fatal(err)
			}
			states = append(states, r.GetState().String())
		}
	}
	if slices.Contains(states, workloadv1.PodState_POD_STATE_STOPPED.String()) {
		t.Errorf("reports after the move %v, want no STOPPED", states)
	}
}

// A binding deleted and written again at once (the pod evicted and bound
// to the same node again) starts the new pod once the old one has exited:
// they share a pod id, so a start beside the ending pod would have its
// directory taken back and its cgroup killed by the old one's end.
func TestRun_boundAgainWaitsForTheStoppedPod(t *testing.T) {
	f := newFixture(t)
	f.run(t)
	led := ledger(t)
	// Slow to stop: its end comes well after the new binding.
	f.workload(t, "again", "sh", "-c", `trap 'sleep 0.5; exit 0' TERM; echo $$ >> `+led+`; while [ ! -e go ]; do sleep 0.05; done`)
	f.bind(t, "again")
	f.waitRun(t, "again", workloadv1.PodState_POD_STATE_RUNNING)
	runs := func() []string {
		b, _ := os.ReadFile(led)
		return strings.Fields(string(b))
	}
	eventually(t, "the first pod", func() bool { return len(runs()) == 1 })
	if _, err := f.etcd.Client.Delete(context.Background(), nodemanager.BindingKey("node-1", "team-a", "again", 0)); err != nil {
		t.Fatal(err)
	}
	f.bind(t, "again")
	eventually(t, "the second pod", func() bool { return len(runs()) == 2 })
	if err := os.WriteFile(f.podDir("again")+"/go", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := f.waitRun(t, "again", workloadv1.PodState_POD_STATE_SUCCEEDED); r.GetExitCode() != 0 {
		t.Errorf("the second pod: %v, want it to end by itself", r)
	}
}
