package clusterproto_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

func devices(n int32) *workloadv1.GpuRequest {
	return &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: n}}
}

func TestLeadRequestAndPodSpec(t *testing.T) {
	workers := func(m *workloadv1.MasterSpec) *workloadv1.WorkloadSpec {
		return &workloadv1.WorkloadSpec{Image: "w", Command: []string{"work"}, Gpu: devices(2), MilliCpu: 1000, Pods: 3,
			Distributed: &workloadv1.DistributedSpec{Framework: workloadv1.Framework_FRAMEWORK_PYTORCH, Master: m}}
	}
	tests := map[string]struct {
		spec                  *workloadv1.WorkloadSpec
		wantLead              *cluster.PodRequest
		wantImage, wantMaster string // pod 0's image and command
		wantGPU               int32  // pod 0's whole GPUs
	}{
		"no master: every pod a worker": {spec: workers(nil), wantImage: "w", wantMaster: "work", wantGPU: 2},
		"a CPU-only master with its own image and command": {
			spec:     workers(&workloadv1.MasterSpec{Image: "m", Command: []string{"lead"}, MilliCpu: 500}),
			wantLead: &cluster.PodRequest{CPU: 500}, wantImage: "m", wantMaster: "lead"},
		"a master asking what a worker does: no lead of its own": {
			spec:      workers(&workloadv1.MasterSpec{Gpu: devices(2), MilliCpu: 1000, Command: []string{"lead"}}),
			wantImage: "w", wantMaster: "lead", wantGPU: 2},
		"not distributed": {spec: &workloadv1.WorkloadSpec{Image: "w", Command: []string{"work"}, Gpu: devices(2)},
			wantImage: "w", wantMaster: "work", wantGPU: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.wantLead, clusterproto.LeadRequest(tc.spec)); diff != "" {
				t.Errorf("lead (-want +got):\n%s", diff)
			}
			m := clusterproto.PodSpec(tc.spec, 0)
			if m.GetImage() != tc.wantImage || m.GetCommand()[0] != tc.wantMaster || m.GetGpu().GetDevices() != tc.wantGPU {
				t.Errorf("pod 0 runs %s %v with %d GPUs, want %s %s with %d", m.GetImage(), m.GetCommand(), m.GetGpu().GetDevices(), tc.wantImage, tc.wantMaster, tc.wantGPU)
			}
			if w := clusterproto.PodSpec(tc.spec, 1); w != tc.spec {
				t.Errorf("pod 1 runs %v, want the spec itself", w)
			}
			if tc.spec.GetCommand()[0] != "work" {
				t.Errorf("PodSpec changed the spec: %v", tc.spec)
			}
		})
	}
}

func TestGang(t *testing.T) {
	w := &workloadv1.Workload{Name: "projects/p/workloads/t", Uid: "u1", Spec: &workloadv1.WorkloadSpec{Pods: 3, MinPods: 2,
		Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}},
		Distributed: &workloadv1.DistributedSpec{Framework: workloadv1.Framework_FRAMEWORK_PYTORCH,
			Master: &workloadv1.MasterSpec{Gpu: devices(4)}}}}
	g, ok := clusterproto.Gang(w, clusterproto.Named(w, ".t"))
	if !ok {
		t.Fatal("not a gang")
	}
	if g.MinPods != 2 || g.ID != "u1" || len(g.Pods) != 3 {
		t.Errorf("gang %+v", g)
	}
	wantHosts := []string{"t-master-0.t", "t-worker-1.t", "t-worker-2.t"}
	wantGPUs := []int{4, 1, 1} // a fraction counts as one GPU
	for i, p := range g.Pods {
		if p.Host != wantHosts[i] || p.Port != 29500 || p.GPUs != wantGPUs[i] {
			t.Errorf("pod %d: %+v, want %s:29500 with %d GPUs", i, p, wantHosts[i], wantGPUs[i])
		}
	}
	lo, _ := clusterproto.Gang(w, clusterproto.Loopback(w))
	if lo.Pods[0].Host != "127.0.0.1" || lo.Pods[1].Port != lo.Pods[0].Port+1 {
		t.Errorf("loopback pods %+v, want 127.0.0.1 and a port each", lo.Pods)
	}
	if _, ok := clusterproto.Gang(&workloadv1.Workload{Spec: &workloadv1.WorkloadSpec{}}, clusterproto.Loopback(w)); ok {
		t.Error("a workload without spec.distributed is a gang")
	}
}
