package workload_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

func TestCreateWorkload_InvalidFields(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	gpu := func(r *workloadv1.GpuRequest) func(*workloadv1.CreateWorkloadRequest) {
		return func(req *workloadv1.CreateWorkloadRequest) { req.Workload.Spec.Gpu = r }
	}
	spec := func(f func(*workloadv1.WorkloadSpec)) func(*workloadv1.CreateWorkloadRequest) {
		return func(req *workloadv1.CreateWorkloadRequest) { f(req.Workload.Spec) }
	}
	ofType := func(typ workloadv1.WorkloadType, priority string) func(*workloadv1.CreateWorkloadRequest) {
		return func(req *workloadv1.CreateWorkloadRequest) {
			req.Workload.Type = typ
			req.Workload.Spec.Priority = priority
		}
	}
	for name, tc := range map[string]struct {
		change     func(*workloadv1.CreateWorkloadRequest)
		wantFields []string
		wantIn     string // a phrase the single violation's description must contain
	}{
		"a parent that is not a project name": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.Parent = "team-a" }, wantFields: []string{"parent"}},
		"all projects as the parent of a create": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.Parent = "projects/-" }, wantFields: []string{"parent"}},
		"an empty workload id": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.WorkloadId = "" }, wantFields: []string{"workload_id"}},
		"a workload id with capitals": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.WorkloadId = "Train1" }, wantFields: []string{"workload_id"}},
		"a workload id starting with a digit": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.WorkloadId = "1train" }, wantFields: []string{"workload_id"}},
		"a workload id with an underscore": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.WorkloadId = "train_1" }, wantFields: []string{"workload_id"}},
		"a workload id of 64 characters": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.WorkloadId = "a" + strings.Repeat("b", 63) }, wantFields: []string{"workload_id"}},
		"no workload": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.Workload = nil }, wantFields: []string{"workload"}},
		"no type": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Type = 0 }, wantFields: []string{"workload.type"}},
		"a type number the API does not define": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Type = 42 }, wantFields: []string{"workload.type"}},
		"no spec": {
			change: func(r *workloadv1.CreateWorkloadRequest) { r.Workload.Spec = nil }, wantFields: []string{"workload.spec"}},
		"no image": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.Image = "" }), wantFields: []string{"workload.spec.image"}},
		"an image with a space": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.Image = "pytorch latest" }), wantFields: []string{"workload.spec.image"}},
		"an env name with a dash": {
			change: spec(func(s *workloadv1.WorkloadSpec) {
				s.Env = []*workloadv1.EnvVar{{Name: "MY-VAR", Value: "1"}}
			}), wantFields: []string{"workload.spec.env[0].name"}},
		"an env name set twice": {
			change: spec(func(s *workloadv1.WorkloadSpec) {
				s.Env = []*workloadv1.EnvVar{{Name: "A", Value: "1"}, {Name: "B"}, {Name: "A", Value: "2"}}
			}), wantFields: []string{"workload.spec.env[2].name"}},
		"a GPU request with no amount": {
			change: gpu(&workloadv1.GpuRequest{}), wantFields: []string{"workload.spec.gpu"}, wantIn: "exactly one of"},
		"zero whole GPUs": {
			change: gpu(&workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 0}}), wantFields: []string{"workload.spec.gpu.devices"}},
		"a negative number of GPUs": {
			change: gpu(&workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: -2}}), wantFields: []string{"workload.spec.gpu.devices"}},
		"a GPU fraction of zero": {
			change: gpu(&workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 0}}), wantFields: []string{"workload.spec.gpu.fraction_milli"}},
		"a GPU fraction of a whole GPU": {
			change: gpu(&workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 1000}}), wantFields: []string{"workload.spec.gpu.fraction_milli"}},
		"a GPU fraction above one": {
			change: gpu(&workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 1500}}), wantFields: []string{"workload.spec.gpu.fraction_milli"}},
		"no GPU memory": {
			change: gpu(&workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_GpuMemoryBytes{GpuMemoryBytes: 0}}), wantFields: []string{"workload.spec.gpu.gpu_memory_bytes"}},
		"a negative CPU request": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.MilliCpu = -1 }), wantFields: []string{"workload.spec.milli_cpu"}},
		"a negative memory request": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.MemoryBytes = -1 }), wantFields: []string{"workload.spec.memory_bytes"}},
		"a negative number of pods": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.Pods = -1 }), wantFields: []string{"workload.spec.pods"}},
		"more than 1000 pods": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.Pods = 1001 }), wantFields: []string{"workload.spec.pods"}},
		"a minimum above the pods": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.Pods, s.MinPods = 2, 3 }), wantFields: []string{"workload.spec.min_pods"}},
		"a minimum above the default of one pod": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.MinPods = 2 }), wantFields: []string{"workload.spec.min_pods"}},
		"a negative minimum": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.Pods, s.MinPods = 2, -1 }), wantFields: []string{"workload.spec.min_pods"}},
		"a workspace asking for train": {
			change: ofType(workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, "train"), wantFields: []string{"workload.spec.priority"},
			wantIn: "build or interactive-preemptible"},
		"a workspace asking for inference": {
			change: ofType(workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, "inference"), wantFields: []string{"workload.spec.priority"},
			wantIn: "build or interactive-preemptible"},
		"a training asking for a class that is not preemptible": {
			change: ofType(workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, "build"), wantFields: []string{"workload.spec.priority"},
			wantIn: "interactive-preemptible or train"},
		"inference asking for train": {
			change: ofType(workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE, "train"), wantFields: []string{"workload.spec.priority"},
			wantIn: "must be inference"},
		"an unknown priority with another bad field": {
			change:     spec(func(s *workloadv1.WorkloadSpec) { s.Priority, s.Image = "urgent", "" }),
			wantFields: []string{"workload.spec.image", "workload.spec.priority"}},
		"a node pool without its collection": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.NodePools = []string{"a100"} }), wantFields: []string{"workload.spec.node_pools[0]"}},
		"an empty node pool": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.NodePools = []string{"nodepools/a100", ""} }), wantFields: []string{"workload.spec.node_pools[1]"}},
		"a node pool listed twice": {
			change: spec(func(s *workloadv1.WorkloadSpec) {
				s.NodePools = []string{"nodepools/a100", "nodepools/h100", "nodepools/a100"}
			}), wantFields: []string{"workload.spec.node_pools[2]"}},
		"a node type with a space": {
			change: spec(func(s *workloadv1.WorkloadSpec) { s.NodeType = "dgx h100" }), wantFields: []string{"workload.spec.node_type"}},
		"a tool with a name that is no port name": {
			change: spec(func(s *workloadv1.WorkloadSpec) {
				s.Tools = []*workloadv1.Tool{{Name: "Jupyter-Lab", Type: workloadv1.ToolType_TOOL_TYPE_JUPYTER, Port: 8888}}
			}), wantFields: []string{"workload.spec.tools[0].name"}},
		"a tool name of 16 characters": {
			change: spec(func(s *workloadv1.WorkloadSpec) {
				s.Tools = []*workloadv1.Tool{{Name: "a" + strings.Repeat("b", 15), Type: workloadv1.ToolType_TOOL_TYPE_CUSTOM, Port: 80}}
			}), wantFields: []string{"workload.spec.tools[0].name"}},
		"a tool named as the serving port": {
			change: spec(func(s *workloadv1.WorkloadSpec) {
				s.Tools = []*workloadv1.Tool{{Name: "serving", Type: workloadv1.ToolType_TOOL_TYPE_CUSTOM, Port: 80}}
			}), wantFields: []string{"workload.spec.tools[0].name"}},
		"two tools of one name and one port, no type, port 0": {
			change: spec(func(s *workloadv1.WorkloadSpec) {
				s.Tools = []*workloadv1.Tool{{Name: "lab", Type: workloadv1.ToolType_TOOL_TYPE_JUPYTER, Port: 8888},
					{Name: "lab", Type: workloadv1.ToolType_TOOL_TYPE_JUPYTER, Port: 8888}, {Name: "tb", Port: 0}}
			}), wantFields: []string{"workload.spec.tools[1].name", "workload.spec.tools[1].port", "workload.spec.tools[2].port", "workload.spec.tools[2].type"}},
		"a tool path with ..": {
			change: spec(func(s *workloadv1.WorkloadSpec) {
				s.Tools = []*workloadv1.Tool{{Name: "lab", Type: workloadv1.ToolType_TOOL_TYPE_JUPYTER, Port: 8888, PathPrefix: "/a/../b"}}
			}), wantFields: []string{"workload.spec.tools[0].path_prefix"}},
		"an endpoint on a training": {
			change: spec(func(s *workloadv1.WorkloadSpec) {
				s.Serving = &workloadv1.Serving{Port: 8000, Access: workloadv1.ServingAccess_SERVING_ACCESS_PROJECT}
			}), wantFields: []string{"workload.spec.serving"}},
		"an endpoint with no port and no access": {
			change: func(r *workloadv1.CreateWorkloadRequest) {
				r.Workload.Type = workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE
				r.Workload.Spec.Serving = &workloadv1.Serving{}
			}, wantFields: []string{"workload.spec.serving.access", "workload.spec.serving.port"}},
		"several bad fields at once": {
			change: func(r *workloadv1.CreateWorkloadRequest) {
				r.WorkloadId = "Bad"
				r.Workload.Spec.Image = ""
				r.Workload.Spec.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 2000}}
			},
			wantFields: []string{"workload.spec.gpu.fraction_milli", "workload.spec.image", "workload_id"}},
	} {
		t.Run(name, func(t *testing.T) {
			req := &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "a1", Workload: training()}
			tc.change(req)
			_, err := e.client.CreateWorkload(t.Context(), req)
			md := wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
			got := violations(err)
			fields := make([]string, 0, len(got))
			for f := range got {
				fields = append(fields, f)
			}
			slices.Sort(fields)
			if diff := cmp.Diff(tc.wantFields, fields); diff != "" {
				t.Errorf("violated fields (-want +got):\n%s", diff)
			}
			if md["field"] == "" {
				t.Errorf("ErrorInfo metadata %v has no field", md)
			}
			if tc.wantIn != "" && !strings.Contains(got[tc.wantFields[0]], tc.wantIn) {
				t.Errorf("description %q does not say %q", got[tc.wantFields[0]], tc.wantIn)
			}
		})
	}
	keys, _ := e.storeState(t)
	for k := range keys {
		if strings.HasPrefix(k, "/runway/v1/workloads/") {
			t.Errorf("a rejected create left %s behind", k)
		}
	}
}

func TestCreateWorkload_UnknownPriority(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := training()
	w.Spec.Priority = "urgent"
	_, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "a1", Workload: w})
	md := wantError(t, err, codes.InvalidArgument, "PRIORITY_NOT_FOUND")
	if md["priority"] != "urgent" {
		t.Errorf("metadata %v, want priority urgent", md)
	}
	if _, ok := violations(err)["workload.spec.priority"]; !ok {
		t.Errorf("violations %v, want one on workload.spec.priority", violations(err))
	}
}
