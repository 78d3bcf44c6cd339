package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// TestDevNodeTypeRuleAndExamples runs the dev composition with two nodes of
// 2 GPUs, node-1 of type a100 and node-2 of type dgx. Project team-a's
// trainings are limited to dgx: one without a node type is rejected; three
// 1-GPU trainings, submitted from the example environment "quick-start" and
// compute resource "one-gpu" that `runway dev` creates, fill node-2 and the
// third waits, never placed on node-1, although node-1 is idle until a
// workspace (not ruled) takes it with "two-gpus".
func TestDevNodeTypeRuleAndExamples(t *testing.T) {
	d, cli, dir, conn := startDevWithoutNodes(t)
	runAgentWithLabels(t, cli, dir, "node-1", map[string]string{"run.ai/type": "a100"})
	runAgentWithLabels(t, cli, dir, "node-2", map[string]string{"run.ai/type": "dgx"})
	gov := workloadv1.NewGovernanceServiceClient(conn)

	deserved := int64(4000)
	if _, err := d.quota.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: "team-a", Project: &quotav1.Project{
		NodePoolQuotas:  []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}},
		SchedulingRules: []*quotav1.SchedulingRules{{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, NodeTypes: []string{"dgx"}}},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"environments/quick-start", "computeResources/one-gpu", "computeResources/two-gpus"} {
		var err error
		if name == "environments/quick-start" {
			_, err = gov.GetEnvironment(t.Context(), &workloadv1.GetEnvironmentRequest{Name: name})
		} else {
			_, err = gov.GetComputeResource(t.Context(), &workloadv1.GetComputeResourceRequest{Name: name})
		}
		if err != nil {
			t.Errorf("example %s: %v", name, err)
		}
	}

	submit := func(id string, typ workloadv1.WorkloadType, nodeType, compute string) error {
		_, err := d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: id,
			Environment: "quick-start", ComputeResource: compute,
			Workload: &workloadv1.Workload{Type: typ, Spec: &workloadv1.WorkloadSpec{NodeType: nodeType}}})
		return err
	}
	if err := submit("no-type", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, "", "one-gpu"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("training without a node type: %v, want InvalidArgument", err)
	}
	for _, id := range []string{"t1", "t2", "t3"} {
		if err := submit(id, workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, "dgx", "one-gpu"); err != nil {
			t.Fatal(err)
		}
	}
	get := func(id string) *workloadv1.Workload {
		w, err := d.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/" + id})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// placed maps each workload id to its nodes.
	placed := func(ids ...string) map[string][]string {
		out := map[string][]string{}
		for _, id := range ids {
			out[id] = get(id).GetStatus().GetNodes()
		}
		return out
	}
	eventually(t, "two trainings running on node-2", func() string {
		n := 0
		for id, nodes := range placed("t1", "t2", "t3") {
			if len(nodes) > 0 && !slices.Equal(nodes, []string{"nodes/node-2"}) {
				t.Fatalf("%s placed on %v, outside the dgx node", id, nodes)
			}
			if len(nodes) > 0 {
				n++
			}
		}
		if n != 2 {
			return fmt.Sprintf("placed %v", placed("t1", "t2", "t3"))
		}
		return ""
	})
	// Several scheduling cycles (100 ms each) with node-1 idle: the third
	// training still waits.
	for range 10 {
		time.Sleep(100 * time.Millisecond)
		for id, nodes := range placed("t1", "t2", "t3") {
			if slices.Contains(nodes, "nodes/node-1") {
				t.Fatalf("%s placed on node-1 (a100)", id)
			}
		}
	}
	var waiting string
	for id, nodes := range placed("t1", "t2", "t3") {
		if len(nodes) == 0 {
			waiting = id
		}
	}
	if w := get(waiting); w.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING {
		t.Errorf("%s: phase %v, want PENDING", waiting, w.GetStatus().GetPhase())
	}
	// A workspace is not ruled: it takes the a100 node.
	if err := submit("ws", workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, "", "two-gpus"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the workspace on node-1", func() string {
		if nodes := get("ws").GetStatus().GetNodes(); !slices.Equal(nodes, []string{"nodes/node-1"}) {
			return fmt.Sprintf("ws on %v", nodes)
		}
		return ""
	})
}

// TestDevTimeLimitStops: a training under a 1 s time limit runs, is stopped
// by the workload controller (its limit check runs every 5 s) and released
// by the real scheduler: STOPPED, holding nothing, with the reason.
func TestDevTimeLimitStops(t *testing.T) {
	d := startDev(t, t.TempDir(), 1, 2)
	if _, err := d.quota.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: "team-a", Project: &quotav1.Project{
		SchedulingRules: []*quotav1.SchedulingRules{{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, TimeLimit: durationpb.New(time.Second)}},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "t1",
		Environment: "quick-start", Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING}}); err != nil {
		t.Fatal(err)
	}
	ran := false
	eventually(t, "t1 stopped by its time limit", func() string {
		w, err := d.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/t1"})
		if err != nil {
			return err.Error()
		}
		st := w.GetStatus()
		ran = ran || st.GetPhase() == running
		if st.GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED || len(st.GetNodes()) != 0 {
			return fmt.Sprintf("status %v", st)
		}
		if !strings.Contains(st.GetStopReason(), "time limit") || st.GetRunningTime().AsDuration() < time.Second {
			return fmt.Sprintf("stopped with reason %q after running %v", st.GetStopReason(), st.GetRunningTime().AsDuration())
		}
		return ""
	})
	if !ran {
		t.Error("t1 was never seen RUNNING")
	}
}
