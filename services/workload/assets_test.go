package workload_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// A submission from an environment and a compute resource stores the very
// spec of the same submission written out, and the policy checks apply to
// the result.
func TestAssets_SubmitEqualsTheExplicitSubmit(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research", "team-b": "ops"})
	ctx := t.Context()
	env, err := e.gov.CreateEnvironment(ctx, &workloadv1.CreateEnvironmentRequest{EnvironmentId: "pytorch", Environment: &workloadv1.Environment{
		Image: "nvcr.io/nvidia/pytorch:25.01-py3", Command: []string{"python", "train.py"}, Args: []string{"--epochs", "3"},
		Env: []*workloadv1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "SEED", Value: "1"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if env.GetName() != "environments/pytorch" || env.GetEtag() == "" {
		t.Errorf("environment %v, want name environments/pytorch and an etag", env)
	}
	if _, err := e.gov.CreateComputeResource(ctx, &workloadv1.CreateComputeResourceRequest{Parent: "departments/research", ComputeResourceId: "half",
		ComputeResource: &workloadv1.ComputeResource{Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}},
			MilliCpu: 4000, MemoryBytes: 16 << 30}}); err != nil {
		t.Fatal(err)
	}

	got, err := e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "assets",
		Environment: "pytorch", ComputeResource: "half",
		Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Env: []*workloadv1.EnvVar{{Name: "SEED", Value: "7"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	explicit := e.create(t, "team-a", "explicit", &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		Spec: &workloadv1.WorkloadSpec{
			Image: "nvcr.io/nvidia/pytorch:25.01-py3", Command: []string{"python", "train.py"}, Args: []string{"--epochs", "3"},
			Env: []*workloadv1.EnvVar{{Name: "NCCL_DEBUG", Value: "INFO"}, {Name: "SEED", Value: "7"}},
			Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}}, MilliCpu: 4000, MemoryBytes: 16 << 30,
		}})
	if diff := cmp.Diff(explicit.GetSpec(), got.GetSpec(), protocmp.Transform()); diff != "" {
		t.Errorf("spec from assets (-explicit +assets):\n%s", diff)
	}

	// Full names work too; a department's asset is not visible to another
	// department's project.
	if _, err := e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "full",
		Environment: "environments/pytorch", ComputeResource: "departments/research/computeResources/half",
		Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING}}); err != nil {
		t.Errorf("by full names: %v", err)
	}
	_, err = e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-b", WorkloadId: "x",
		Environment: "pytorch", ComputeResource: "half", Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING}})
	md := wantError(t, err, codes.NotFound, "COMPUTE_RESOURCE_NOT_FOUND")
	if md["computeResource"] != "half" {
		t.Errorf("metadata %v", md)
	}
	_, err = e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-b", WorkloadId: "x",
		Environment: "pytorch", ComputeResource: "departments/research/computeResources/half", Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING}})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	if _, ok := violations(err)["compute_resource"]; !ok {
		t.Errorf("violations %v, want compute_resource", violations(err))
	}

	// The policy checks the spec the assets made.
	e.setPolicy(t, "departments/research/policies/training", &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{"milliCpu": {Max: f64(2000)}}})
	_, err = e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "y",
		Environment: "pytorch", ComputeResource: "half", Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING}})
	policyViolation(t, err, "workload.spec.milli_cpu", `rule "max"`, "departments/research/policies/training")
}

func TestAssets_CRUD(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research"})
	ctx := t.Context()
	for _, id := range []string{"one-gpu", "two-gpus"} {
		if _, err := e.gov.CreateComputeResource(ctx, &workloadv1.CreateComputeResourceRequest{Parent: "projects/team-a", ComputeResourceId: id,
			ComputeResource: &workloadv1.ComputeResource{Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.gov.CreateComputeResource(ctx, &workloadv1.CreateComputeResourceRequest{Parent: "projects/team-a", ComputeResourceId: "one-gpu",
		ComputeResource: &workloadv1.ComputeResource{}})
	wantError(t, err, codes.AlreadyExists, "COMPUTE_RESOURCE_ALREADY_EXISTS")
	_, err = e.gov.CreateComputeResource(ctx, &workloadv1.CreateComputeResourceRequest{Parent: "projects/nope", ComputeResourceId: "x",
		ComputeResource: &workloadv1.ComputeResource{}})
	wantError(t, err, codes.NotFound, "PROJECT_NOT_FOUND")
	_, err = e.gov.CreateEnvironment(ctx, &workloadv1.CreateEnvironmentRequest{EnvironmentId: "Bad", Environment: &workloadv1.Environment{
		Env: []*workloadv1.EnvVar{{Name: "1X"}}}})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	if v := violations(err); len(v) != 3 || v["environment.image"] == "" || v["environment.env[0].name"] == "" || v["environment_id"] == "" {
		t.Errorf("violations %v, want environment_id, environment.image and environment.env[0].name", v)
	}

	list, err := e.gov.ListComputeResources(ctx, &workloadv1.ListComputeResourcesRequest{Parent: "projects/team-a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetComputeResources()) != 2 || list.GetComputeResources()[0].GetName() != "projects/team-a/computeResources/one-gpu" {
		t.Errorf("list %v", list)
	}
	if account, err := e.gov.ListComputeResources(ctx, &workloadv1.ListComputeResourcesRequest{}); err != nil || len(account.GetComputeResources()) != 0 {
		t.Errorf("account list %v, %v: want none (the project's are not the account's)", account, err)
	}
	if _, err := e.gov.DeleteComputeResource(ctx, &workloadv1.DeleteComputeResourceRequest{Name: "projects/team-a/computeResources/one-gpu"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.gov.GetComputeResource(ctx, &workloadv1.GetComputeResourceRequest{Name: "projects/team-a/computeResources/one-gpu"})
	wantError(t, err, codes.NotFound, "COMPUTE_RESOURCE_NOT_FOUND")

	// REST: the same resources under their paths.
	code, body := e.do(t, "POST", "/v1/projects/team-a/environments?environmentId=jupyter", `{"image":"jupyter/base","command":["jupyter","lab"]}`)
	if code != 200 {
		t.Fatalf("REST create environment: HTTP %d %s", code, body)
	}
	code, body = e.do(t, "GET", "/v1/projects/team-a/environments/jupyter", "")
	if code != 200 {
		t.Errorf("REST get environment: HTTP %d %s", code, body)
	}
}

// A node-type rule makes the node type required and limited to its list;
// the workload keeps the list it was submitted under.
func TestNodeTypeRule_Submit(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research"}, &quotav1.SchedulingRules{
		WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, NodeTypes: []string{"dgx"}})
	for name, nodeType := range map[string]string{"none": "", "another": "a100"} {
		t.Run(name, func(t *testing.T) {
			w := training()
			w.Spec.NodeType = nodeType
			_, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "x", Workload: w})
			wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
			if d := violations(err)["workload.spec.node_type"]; d == "" || !strings.Contains(d, "dgx") || !strings.Contains(d, "projects/team-a") {
				t.Errorf("violations %v, want node_type naming dgx and the rule's project", violations(err))
			}
		})
	}
	w := training()
	w.Spec.NodeType = "dgx"
	got := e.create(t, "team-a", "ok", w)
	if l := got.GetLimits(); len(l.GetNodeTypes()) != 1 || l.GetSource() != "projects/team-a" {
		t.Errorf("limits %v", l)
	}
	// Another type is not ruled.
	ws := training()
	ws.Type = workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE
	if got := e.create(t, "team-a", "ws", ws); got.GetLimits() != nil {
		t.Errorf("workspace limits %v, want none", got.GetLimits())
	}
}
