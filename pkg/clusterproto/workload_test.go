package clusterproto_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// t0 is a fixed creation time.
var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func TestToClusterSpec(t *testing.T) {
	created := timestamppb.New(t0)
	for name, tc := range map[string]struct {
		w    *workloadv1.Workload
		want cluster.WorkloadSpec
	}{
		"a distributed training on fractions in preferred pools": {
			w: &workloadv1.Workload{
				Name: "projects/team-a/workloads/a1", Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, CreateTime: created,
				Spec: &workloadv1.WorkloadSpec{
					Image: "x", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}},
					MilliCpu: 4000, MemoryBytes: 8 << 30, Pods: 4, MinPods: 2, Priority: "interactive-preemptible",
					NodePools: []string{"nodepools/h100", "nodepools/a100"}, NodeType: "dgx",
				},
			},
			want: cluster.WorkloadSpec{
				ID: "team-a/a1", Name: "a1", Project: "team-a", Type: "training", Priority: cluster.PriorityInteractivePreemptible,
				Pods: 4, MinPods: 2, Pod: cluster.PodRequest{GPU: 500, CPU: 4000, Memory: 8 << 30},
				Pools: []string{"h100", "a100"}, NodeType: "dgx", Submitted: time.Duration(t0.UnixNano()),
			},
		},
		"a workspace on whole GPUs with the defaults": {
			w: &workloadv1.Workload{
				Name: "projects/team-b/workloads/ws", Type: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, CreateTime: created,
				Spec: &workloadv1.WorkloadSpec{Image: "x", Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 2}}},
			},
			want: cluster.WorkloadSpec{
				ID: "team-b/ws", Name: "ws", Project: "team-b", Type: "workspace", Priority: cluster.PriorityBuild,
				Pods: 1, MinPods: 1, Pod: cluster.PodRequest{GPU: 2000}, Submitted: time.Duration(t0.UnixNano()),
			},
		},
		"inference replicas on GPU memory": {
			w: &workloadv1.Workload{
				Name: "projects/team-b/workloads/llm", Type: workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE, CreateTime: created,
				Spec: &workloadv1.WorkloadSpec{Image: "x", Pods: 3, Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_GpuMemoryBytes{GpuMemoryBytes: 20 << 30}}},
			},
			want: cluster.WorkloadSpec{
				ID: "team-b/llm", Name: "llm", Project: "team-b", Type: "inference", Priority: cluster.PriorityInference,
				Pods: 3, MinPods: 3, Pod: cluster.PodRequest{GPUMemory: 20 << 30}, Submitted: time.Duration(t0.UnixNano()),
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := clusterproto.ToClusterSpec(tc.w)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ToClusterSpec (-want +got):\n%s", diff)
			}
			// The scheduler core accepts it as it is.
			s := cluster.New()
			for _, p := range got.Pools {
				s.AddPool(p)
			}
			if _, err := s.AddProject(got.Project, "", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Submit(got); err != nil {
				t.Errorf("cluster.State.Submit: %v", err)
			}
		})
	}
}

func TestToClusterSpec_Errors(t *testing.T) {
	spec := &workloadv1.WorkloadSpec{Image: "x"}
	for name, w := range map[string]*workloadv1.Workload{
		"a name that is not a workload name": {Name: "team-a/a1", Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: spec},
		"no type":                            {Name: "projects/team-a/workloads/a1", Spec: spec},
		"an unknown priority": {Name: "projects/team-a/workloads/a1", Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "x", Priority: "urgent"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := clusterproto.ToClusterSpec(w); !errors.Is(err, clusterproto.ErrNotConvertible) {
				t.Errorf("error %v, want ErrNotConvertible", err)
			}
		})
	}
}

func TestImageRegistry(t *testing.T) {
	for image, want := range map[string]string{
		"busybox":                         "docker.io",
		"library/busybox:1":               "docker.io",
		"localhost/bb:1":                  "localhost",
		"127.0.0.1:5000/team/img@sha256:": "127.0.0.1:5000",
		"Registry.Example.com/a/b:c":      "registry.example.com",
		"index.docker.io/library/x":       "docker.io",
		"nvcr.io/nvidia/pytorch:25.01":    "nvcr.io",
	} {
		if got := clusterproto.ImageRegistry(image); got != want {
			t.Errorf("ImageRegistry(%q) = %q, want %q", image, got, want)
		}
	}
}
