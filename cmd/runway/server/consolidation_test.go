package server_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// TestConsolidationMovesRunningPod covers issue 25's "consolidation is
// atomic through etcd" with the real services and node agents: 4 nodes of
// 2 GPUs, team-a's a and b (1 GPU each) on node-1 and node-2 and c (2
// GPUs) on node-3. team-b's gang j (2 pods of 2 GPUs) fits the 4 free GPUs
// only if a 1-GPU training moves: one plan moves b (the newest) to node-1,
// its agent on node-2 stops it and node-1's starts it again, and the gang
// runs on node-2 and node-4. a and c keep their processes and have no
// event; b's history says where it went and for which project (not for
// which workload: j is another tenant's), and counts no preemption.
func TestConsolidationMovesRunningPod(t *testing.T) {
	d, cli, dir, conn := startDevWithoutNodes(t)
	nodes := nodemanagerv1.NewNodeManagerServiceClient(conn)
	ready := func(want ...string) {
		t.Helper()
		eventually(t, fmt.Sprintf("nodes %v READY", want), func() string {
			r, err := nodes.ListNodes(t.Context(), &nodemanagerv1.ListNodesRequest{})
			if err != nil {
				return err.Error()
			}
			var got []string
			for _, n := range r.GetNodes() {
				if n.GetReadiness() == nodemanagerv1.Readiness_READINESS_READY {
					got = append(got, strings.TrimPrefix(n.GetName(), "nodes/"))
				}
			}
			if !slices.Equal(got, want) {
				return fmt.Sprintf("READY %v", got)
			}
			return ""
		})
	}
	d.project(t, "team-a", 4)
	d.project(t, "team-b", 4)
	create := func(project, id string, pods, gpus int32) {
		t.Helper()
		if _, err := d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
			Parent: "projects/" + project, WorkloadId: id, Workload: &workloadv1.Workload{
				Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
				Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "600"}, Pods: pods, MinPods: pods,
					Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: gpus}}}}}); err != nil {
			t.Fatalf("CreateWorkload(%s/%s): %v", project, id, err)
		}
	}
	get := func(project, id string) *workloadv1.Workload {
		t.Helper()
		w, err := d.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/" + project + "/workloads/" + id})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// runningOn: every pod of the workload RUNNING, on these nodes in pod order.
	runningOn := func(project, id string, want ...string) func() string {
		return func() string {
			st := get(project, id).GetStatus()
			var on []string
			for _, p := range st.GetPods() {
				if p.GetState() != workloadv1.PodState_POD_STATE_RUNNING {
					return fmt.Sprintf("%s/%s: pod %d %s", project, id, p.GetIndex(), p.GetState())
				}
				on = append(on, strings.TrimPrefix(p.GetNode(), "nodes/"))
			}
			if st.GetPhase() != running || !slices.Equal(on, want) {
				return fmt.Sprintf("%s/%s: %s on %v, want RUNNING on %v", project, id, st.GetPhase(), on, want)
			}
			return ""
		}
	}
	// procs is each pod's processes' node, by pod id ({uid}.{index}).
	procs := func() map[string][]string {
		out := map[string][]string{}
		for _, np := range podProcs(dir) {
			node, pod, _ := strings.Cut(np, "/")
			out[pod] = append(out[pod], node)
		}
		for _, ns := range out {
			slices.Sort(ns)
		}
		return out
	}

	// The fragmented pool, built node by node so that placement has one
	// choice each time: f fills node-1 beside a until b and c are placed.
	runAgent(t, cli, dir, "node-1")
	ready("node-1")
	create("team-a", "a", 1, 1)
	create("team-a", "f", 1, 1)
	eventually(t, "a on node-1", runningOn("team-a", "a", "node-1"))
	eventually(t, "f on node-1", runningOn("team-a", "f", "node-1"))
	runAgent(t, cli, dir, "node-2")
	ready("node-1", "node-2")
	create("team-a", "b", 1, 1)
	eventually(t, "b on node-2", runningOn("team-a", "b", "node-2"))
	runAgent(t, cli, dir, "node-3")
	ready("node-1", "node-2", "node-3")
	create("team-a", "c", 1, 2)
	eventually(t, "c on node-3", runningOn("team-a", "c", "node-3"))
	runAgent(t, cli, dir, "node-4")
	ready("node-1", "node-2", "node-3", "node-4")
	fw := get("team-a", "f")
	if _, err := d.workload.DeleteWorkload(t.Context(), &workloadv1.DeleteWorkloadRequest{Name: fw.GetName()}); err != nil {
		t.Fatal(err)
	}
	a, b, c := get("team-a", "a"), get("team-a", "b"), get("team-a", "c")
	pod := func(w *workloadv1.Workload) string { return w.GetUid() + ".0" }
	eventually(t, "f's process gone", func() string {
		if ns := procs()[pod(fw)]; len(ns) > 0 {
			return fmt.Sprintf("f runs on %v", ns)
		}
		return ""
	})
	before := procs()
	pids := func(w *workloadv1.Workload) []int {
		var out []int
		for pid, np := range podProcs(dir) {
			if strings.HasSuffix(np, "/"+pod(w)) {
				out = append(out, pid)
			}
		}
		slices.Sort(out)
		return out
	}
	aPids, cPids := pids(a), pids(c)
	if !slices.Equal(before[pod(a)], []string{"node-1"}) || !slices.Equal(before[pod(b)], []string{"node-2"}) ||
		!slices.Equal(before[pod(c)], []string{"node-3"}) {
		t.Fatalf("before the gang: processes %v", before)
	}

	create("team-b", "j", 2, 2)
	eventually(t, "b RUNNING again on node-1", runningOn("team-a", "b", "node-1"))
	eventually(t, "the gang RUNNING", func() string {
		if why := runningOn("team-b", "j", "node-2", "node-4")(); why != "" {
			return runningOn("team-b", "j", "node-4", "node-2")()
		}
		return ""
	})
	eventually(t, "b's process moved to node-1", func() string {
		if ns := procs()[pod(b)]; !slices.Equal(ns, []string{"node-1"}) {
			return fmt.Sprintf("b's processes on %v", ns)
		}
		return ""
	})
	// One plan, one transaction: b's new binding and the gang's share
	// their revision.
	resp, err := cli.Get(t.Context(), etcdstore.PrefixBindings, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	revs := map[string]int64{}
	for _, kv := range resp.Kvs {
		revs[strings.TrimPrefix(string(kv.Key), etcdstore.PrefixBindings)] = kv.ModRevision
	}
	if r := revs["node-1/team-a.b.0"]; r == 0 || revs["node-2/team-b.j.0"]+revs["node-2/team-b.j.1"] != r ||
		revs["node-4/team-b.j.0"]+revs["node-4/team-b.j.1"] != r {
		t.Errorf("bindings by revision %v: b's move and the gang were not written together", revs)
	}
	if got := pids(a); !slices.Equal(got, aPids) {
		t.Errorf("a's processes %v, were %v: a was touched", got, aPids)
	}
	if got := pids(c); !slices.Equal(got, cPids) {
		t.Errorf("c's processes %v, were %v: c was touched", got, cPids)
	}
	for _, w := range []*workloadv1.Workload{get("team-a", "a"), get("team-a", "c")} {
		for _, e := range w.GetStatus().GetEvents() {
			if e.GetType() == workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED {
				t.Errorf("%s was not moved, yet has the event %v", w.GetName(), e)
			}
		}
	}

	st := get("team-a", "b").GetStatus()
	var moved []*workloadv1.WorkloadEvent
	var history []string
	for _, e := range st.GetEvents() {
		history = append(history, strings.TrimPrefix(e.GetType().String(), "WORKLOAD_EVENT_TYPE_")+": "+e.GetMessage())
		if e.GetType() == workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED {
			moved = append(moved, e)
		}
	}
	const why = "Moved from node-2 to node-1 in node pool default to make room for a workload of project team-b, "
	if len(moved) != 1 || moved[0].GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_CONSOLIDATION ||
		!strings.HasPrefix(moved[0].GetMessage(), why) {
		t.Errorf("b's history %q, want one move saying %q", history, why)
	}
	if len(moved) == 1 && (moved[0].GetBy() != "projects/team-b" || strings.Contains(moved[0].GetMessage(), "workloads/j")) {
		t.Errorf("b's move names team-b's workload: by %q, %q", moved[0].GetBy(), moved[0].GetMessage())
	}
	if st.GetPreemptionCount() != 0 {
		t.Errorf("b's preemption count %d after a move, want 0", st.GetPreemptionCount())
	}
	t.Logf("b's history: %q; processes at the end: %v", history, slices.Sorted(maps.Values(podProcs(dir))))
}
