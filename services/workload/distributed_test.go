package workload_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// distributed is a 1 + 2 PyTorch training: a CPU-only master, 1-GPU workers.
func distributed() *workloadv1.Workload {
	w := training()
	w.Spec.Pods = 3
	w.Spec.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}
	w.Spec.Distributed = &workloadv1.DistributedSpec{Framework: workloadv1.Framework_FRAMEWORK_PYTORCH,
		Master: &workloadv1.MasterSpec{MilliCpu: 500, Command: []string{"/bin/sh", "-c", "serve"}}}
	return w
}

func TestCreateWorkload_Distributed(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	got, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "ddp", Workload: distributed()})
	if err != nil {
		t.Fatal(err)
	}
	if m := got.GetSpec().GetDistributed().GetMaster(); m.GetMilliCpu() != 500 || m.GetGpu() != nil || got.GetSpec().GetPods() != 3 {
		t.Errorf("stored spec %v: want the master's own 0.5 CPU and no GPU, 3 pods", got.GetSpec())
	}
}

func TestCreateWorkload_InvalidDistributed(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	for name, tc := range map[string]struct {
		change     func(*workloadv1.CreateWorkloadRequest)
		wantFields []string
	}{
		"no framework": {
			change:     func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Spec.Distributed.Framework = 0 },
			wantFields: []string{"workload.spec.distributed.framework"}},
		"a framework the API does not define": {
			change:     func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Spec.Distributed.Framework = 42 },
			wantFields: []string{"workload.spec.distributed.framework"}},
		"a master without workers": {
			change:     func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Spec.Pods = 1 },
			wantFields: []string{"workload.spec.pods"}},
		"a distributed workspace": {
			change: func(r *workloadv1.CreateWorkloadRequest) {
				r.Workload.Type = workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE
			},
			wantFields: []string{"workload.spec.distributed"}},
		"an elastic MPI training": {
			change: func(r *workloadv1.CreateWorkloadRequest) {
				r.Workload.Spec.Distributed.Framework = workloadv1.Framework_FRAMEWORK_MPI
				r.Workload.Spec.MinPods = 2
			},
			wantFields: []string{"workload.spec.min_pods"}},
		"an elastic PyTorch training whose minimum has no worker": {
			change:     func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Spec.MinPods = 1 },
			wantFields: []string{"workload.spec.min_pods"}},
		"a name too long for its pods' host names": {
			change:     func(r *workloadv1.CreateWorkloadRequest) { r.WorkloadId = "a" + strings.Repeat("b", 54) },
			wantFields: []string{"workload_id"}},
		"a master asking for no whole GPU": {
			change: func(r *workloadv1.CreateWorkloadRequest) {
				r.Workload.Spec.Distributed.Master.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 0}}
			},
			wantFields: []string{"workload.spec.distributed.master.gpu.devices"}},
		"a master image with a space": {
			change:     func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Spec.Distributed.Master.Image = "a b" },
			wantFields: []string{"workload.spec.distributed.master.image"}},
		"a negative backoff limit": {
			change:     func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Spec.Distributed.BackoffLimit = -1 },
			wantFields: []string{"workload.spec.distributed.backoff_limit"}},
		"an unknown restart policy": {
			change:     func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Spec.Distributed.RestartPolicy = 9 },
			wantFields: []string{"workload.spec.distributed.restart_policy"}},
	} {
		t.Run(name, func(t *testing.T) {
			req := &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "ddp", Workload: distributed()}
			tc.change(req)
			_, err := e.client.CreateWorkload(t.Context(), req)
			wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
			var fields []string
			for f := range violations(err) {
				fields = append(fields, f)
			}
			slices.Sort(fields)
			if diff := cmp.Diff(tc.wantFields, fields); diff != "" {
				t.Errorf("violated fields (-want +got):\n%s", diff)
			}
		})
	}
}

// A hostile submitter cannot use the master to get around a policy: the
// rules on a pod's fields (the account's GPU cap and image list) hold for
// the master's own fields too, and a master within them is accepted.
func TestPolicy_MasterGoverned(t *testing.T) {
	e := governed(t)
	dist := func(m *workloadv1.MasterSpec) *workloadv1.WorkloadSpec {
		return &workloadv1.WorkloadSpec{Image: "jax:0.4", NodeType: "dgx", Pods: 3,
			Distributed: &workloadv1.DistributedSpec{Framework: workloadv1.Framework_FRAMEWORK_JAX, Master: m}}
	}
	for name, tc := range map[string]struct {
		master      *workloadv1.MasterSpec
		field, rule string
	}{
		"a master above the GPU cap": {&workloadv1.MasterSpec{Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 8}}},
			"workload.spec.distributed.master.gpu.devices", `rule "max" on field "gpu.devices"`},
		"a master image off the list": {&workloadv1.MasterSpec{Image: "evil:latest"},
			"workload.spec.distributed.master.image", `rule "options" on field "image"`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-b", WorkloadId: "x",
				Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: dist(tc.master)}})
			policyViolation(t, err, tc.field, tc.rule, "policies/training")
		})
	}
	e.create(t, "team-b", "ok", &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		Spec: dist(&workloadv1.MasterSpec{Image: "pytorch:25", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 2}}})})
}

// The status counts each pod's own resources: the master's CPU and memory,
// not a worker's.
func TestController_DistributedAllocation(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := distributed()
	w.Spec.MilliCpu, w.Spec.MemoryBytes = 2000, 4<<30
	w.Spec.Distributed.Master.MemoryBytes = 1 << 30
	got := e.create(t, "team-a", "ddp", w)
	e.runController(t)
	for pod := range int32(3) {
		e.bindRunning(t, "n1", "team-a", "ddp", pod)
	}
	st := e.await(t, got.GetName(), "running", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING)).GetStatus()
	if st.GetAllocatedMilliCpu() != 500+2*2000 || st.GetAllocatedMemoryBytes() != 1<<30+2*(4<<30) {
		t.Errorf("allocated %d milli-CPU and %d bytes, want the master's 500 and 1 GiB plus two workers' 2000 and 4 GiB",
			st.GetAllocatedMilliCpu(), st.GetAllocatedMemoryBytes())
	}
}
