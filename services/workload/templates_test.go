package workload_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

var (
	trainingType  = workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING
	workspaceType = workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE
)

func vars(kv ...string) []*workloadv1.EnvVar {
	var out []*workloadv1.EnvVar
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, &workloadv1.EnvVar{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// A submission from a template stores the spec of the same submission
// written out; what the submission sets itself overrides the template; the
// template's type, scope and the policy all hold.
func TestTemplates_SubmitEqualsWhatItStandsFor(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research", "team-b": "ops"})
	ctx := t.Context()
	if _, err := e.gov.CreateEnvironment(ctx, &workloadv1.CreateEnvironmentRequest{EnvironmentId: "pytorch", Environment: &workloadv1.Environment{
		Image: "nvcr.io/nvidia/pytorch:25.01-py3", Command: []string{"python", "train.py"}, Env: vars("NCCL_DEBUG", "INFO", "SEED", "0"),
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.gov.CreateComputeResource(ctx, &workloadv1.CreateComputeResourceRequest{ComputeResourceId: "half",
		ComputeResource: &workloadv1.ComputeResource{Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}}, MilliCpu: 4000}}); err != nil {
		t.Fatal(err)
	}
	tmpl, err := e.gov.CreateTemplate(ctx, &workloadv1.CreateTemplateRequest{Parent: "departments/research", TemplateId: "train", Template: &workloadv1.Template{
		Type: trainingType, Environment: "pytorch", ComputeResource: "half",
		Spec: &workloadv1.WorkloadSpec{Pods: 2, Args: []string{"--epochs", "3"}, Env: vars("SEED", "1", "LR", "0.1"), NodeType: "a100"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.GetName() != "departments/research/templates/train" || tmpl.GetEtag() == "" || tmpl.GetCreateTime() == nil {
		t.Errorf("template %v, want its name, an etag and a create time", tmpl)
	}

	fromTemplate := func(id, ref string, typ workloadv1.WorkloadType, spec *workloadv1.WorkloadSpec) (*workloadv1.Workload, error) {
		return e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: id, Template: ref,
			Workload: &workloadv1.Workload{Type: typ, Spec: spec}})
	}
	explicit := func(id string, spec *workloadv1.WorkloadSpec) *workloadv1.Workload {
		spec.Image, spec.Command = "nvcr.io/nvidia/pytorch:25.01-py3", []string{"python", "train.py"}
		spec.Gpu, spec.MilliCpu, spec.NodeType = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}}, 4000, "a100"
		return e.create(t, "team-a", id, &workloadv1.Workload{Type: trainingType, Spec: spec})
	}

	// The template alone, its type included.
	got, err := fromTemplate("from-template", "train", workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := explicit("written-out", &workloadv1.WorkloadSpec{Pods: 2, Args: []string{"--epochs", "3"}, Env: vars("NCCL_DEBUG", "INFO", "SEED", "1", "LR", "0.1")})
	if diff := cmp.Diff(want.GetSpec(), got.GetSpec(), protocmp.Transform()); diff != "" || got.GetType() != trainingType {
		t.Errorf("type %v, spec from the template (-written out +template):\n%s", got.GetType(), diff)
	}
	// The submission's own fields override: a list whole, variables by name.
	got, err = fromTemplate("overridden", "departments/research/templates/train", trainingType,
		&workloadv1.WorkloadSpec{Pods: 3, Args: []string{"--epochs", "9"}, Env: vars("SEED", "7")})
	if err != nil {
		t.Fatal(err)
	}
	want = explicit("overridden-out", &workloadv1.WorkloadSpec{Pods: 3, Args: []string{"--epochs", "9"}, Env: vars("NCCL_DEBUG", "INFO", "LR", "0.1", "SEED", "7")})
	if diff := cmp.Diff(want.GetSpec(), got.GetSpec(), protocmp.Transform()); diff != "" {
		t.Errorf("spec from the template with overrides (-written out +template):\n%s", diff)
	}
	// An environment the submission names replaces the template's.
	if _, err := e.gov.CreateEnvironment(ctx, &workloadv1.CreateEnvironmentRequest{Parent: "projects/team-a", EnvironmentId: "jax",
		Environment: &workloadv1.Environment{Image: "jax:latest"}}); err != nil {
		t.Fatal(err)
	}
	got, err = e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "jax", Template: "train",
		Environment: "jax", Workload: &workloadv1.Workload{Type: trainingType}})
	if err != nil || got.GetSpec().GetImage() != "jax:latest" || got.GetSpec().GetGpu().GetFractionMilli() != 500 {
		t.Errorf("with its own environment: %v, %v; want jax's image and the template's compute resource", got.GetSpec(), err)
	}

	// Another type, another department's template, an unknown one.
	_, err = fromTemplate("ws", "train", workspaceType, nil)
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	if v := violations(err)["template"]; v == "" {
		t.Errorf("violations %v, want template", violations(err))
	}
	_, err = e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-b", WorkloadId: "x", Template: "train",
		Workload: &workloadv1.Workload{Type: trainingType}})
	if md := wantError(t, err, codes.NotFound, "TEMPLATE_NOT_FOUND"); md["template"] != "train" {
		t.Errorf("metadata %v", md)
	}
	_, err = e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-b", WorkloadId: "x",
		Template: "departments/research/templates/train", Workload: &workloadv1.Workload{Type: trainingType}})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")

	// The policy checks the spec the template made.
	e.setPolicy(t, "departments/research/policies/training", &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{"milliCpu": {Max: f64(2000)}}})
	_, err = fromTemplate("y", "train", trainingType, nil)
	policyViolation(t, err, "workload.spec.milli_cpu", `rule "max"`, "departments/research/policies/training")
}

// Templates are created, listed, renamed in one transaction and deleted;
// bad input names its field.
func TestTemplates_CRUD(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research"})
	ctx := t.Context()
	create := func(id string, tm *workloadv1.Template) (*workloadv1.Template, error) {
		return e.gov.CreateTemplate(ctx, &workloadv1.CreateTemplateRequest{Parent: "projects/team-a", TemplateId: id, Template: tm})
	}
	for _, id := range []string{"a", "b"} {
		if _, err := create(id, &workloadv1.Template{Spec: &workloadv1.WorkloadSpec{Image: "busybox"}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := create("a", &workloadv1.Template{})
	wantError(t, err, codes.AlreadyExists, "TEMPLATE_ALREADY_EXISTS")
	_, err = create("c", &workloadv1.Template{Type: workloadv1.WorkloadType(99), Environment: "a/b",
		ComputeResource: "Bad", Spec: &workloadv1.WorkloadSpec{Env: vars("1X", ""), Pods: -1}})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	v := violations(err)
	for _, f := range []string{"template.type", "template.environment", "template.compute_resource", "template.spec.env[0].name", "template.spec.pods"} {
		if v[f] == "" {
			t.Errorf("violations %v, want %s", v, f)
		}
	}

	// Rename: the new name holds the template, the old one is gone.
	renamed, err := e.gov.RenameTemplate(ctx, &workloadv1.RenameTemplateRequest{Name: "projects/team-a/templates/a", NewTemplateId: "c"})
	if err != nil || renamed.GetName() != "projects/team-a/templates/c" || renamed.GetSpec().GetImage() != "busybox" {
		t.Fatalf("rename: %v, %v", renamed, err)
	}
	_, err = e.gov.GetTemplate(ctx, &workloadv1.GetTemplateRequest{Name: "projects/team-a/templates/a"})
	wantError(t, err, codes.NotFound, "TEMPLATE_NOT_FOUND")
	// Onto a taken id, or from a stale etag: nothing changes.
	_, err = e.gov.RenameTemplate(ctx, &workloadv1.RenameTemplateRequest{Name: "projects/team-a/templates/c", NewTemplateId: "b"})
	wantError(t, err, codes.AlreadyExists, "TEMPLATE_ALREADY_EXISTS")
	_, err = e.gov.RenameTemplate(ctx, &workloadv1.RenameTemplateRequest{Name: "projects/team-a/templates/c", NewTemplateId: "c"})
	wantError(t, err, codes.AlreadyExists, "TEMPLATE_ALREADY_EXISTS")
	_, err = e.gov.RenameTemplate(ctx, &workloadv1.RenameTemplateRequest{Name: "projects/team-a/templates/c", NewTemplateId: "d", Etag: "1"})
	wantError(t, err, codes.Aborted, "ETAG_MISMATCH")
	_, err = e.gov.RenameTemplate(ctx, &workloadv1.RenameTemplateRequest{Name: "projects/team-a/templates/c", NewTemplateId: "Bad"})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	list, err := e.gov.ListTemplates(ctx, &workloadv1.ListTemplatesRequest{Parent: "projects/team-a"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range list.GetTemplates() {
		names = append(names, tm.GetName())
	}
	if !cmp.Equal(names, []string{"projects/team-a/templates/b", "projects/team-a/templates/c"}) {
		t.Errorf("templates %v, want b and c", names)
	}
	if _, err := e.gov.DeleteTemplate(ctx, &workloadv1.DeleteTemplateRequest{Name: "projects/team-a/templates/b"}); err != nil {
		t.Fatal(err)
	}

	// REST: the same resources under their paths, rename included.
	if code, body := e.do(t, "POST", "/v1/projects/team-a/templates?templateId=rest", `{"type":"WORKLOAD_TYPE_TRAINING","spec":{"image":"busybox"}}`); code != 200 {
		t.Fatalf("REST create template: HTTP %d %s", code, body)
	}
	if code, body := e.do(t, "POST", "/v1/projects/team-a/templates/rest:rename", `{"newTemplateId":"rested"}`); code != 200 {
		t.Fatalf("REST rename template: HTTP %d %s", code, body)
	}
	if code, body := e.do(t, "GET", "/v1/projects/team-a/templates/rested", ""); code != 200 {
		t.Errorf("REST get template: HTTP %d %s", code, body)
	}
}
