package workload_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

func f64(v float64) *float64 { return &v }
func yes() *bool             { v := true; return &v }

// addOrg writes departments and projects as the quota service would:
// projects maps a project id to its department id.
func (e *env) addOrg(t testing.TB, projects map[string]string, rules ...*quotav1.SchedulingRules) {
	t.Helper()
	seen := map[string]bool{}
	for p, d := range projects {
		if !seen[d] {
			seen[d] = true
			if _, err := e.depts.Create(t.Context(), d, &quotav1.Department{Name: "departments/" + d}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.projects.Create(t.Context(), p, &quotav1.Project{Name: "projects/" + p, Department: "departments/" + d,
			SchedulingRules: rules}); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) setPolicy(t testing.TB, name string, p *workloadv1.Policy) *workloadv1.Policy {
	t.Helper()
	p.Name = name
	got, err := e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{Policy: p, AllowMissing: true})
	if err != nil {
		t.Fatalf("UpdatePolicy(%s): %v", name, err)
	}
	return got
}

// governed is the organisation of the policy tests: the account caps GPUs
// at 2 and lists the images; department research requires a node type and
// defaults CPU; project team-a overrides the CPU default.
func governed(t *testing.T) *env {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research", "team-b": "research", "team-c": "ops"})
	e.setPolicy(t, "policies/training", &workloadv1.Policy{
		Defaults: &workloadv1.WorkloadSpec{MilliCpu: 1000, Image: "pytorch:25"},
		Rules: map[string]*workloadv1.FieldRule{
			"gpu.devices": {Max: f64(2)},
			"image":       {Options: []string{"pytorch:25", "jax:0.4"}},
		},
	})
	e.setPolicy(t, "departments/research/policies/training", &workloadv1.Policy{
		Defaults: &workloadv1.WorkloadSpec{MilliCpu: 2000},
		Rules:    map[string]*workloadv1.FieldRule{"nodeType": {Required: yes()}},
	})
	e.setPolicy(t, "projects/team-a/policies/training", &workloadv1.Policy{
		Defaults: &workloadv1.WorkloadSpec{MilliCpu: 4000, NodeType: "dgx"},
	})
	return e
}

func TestPolicy_EffectiveDefaultsOverriddenDownTheTree(t *testing.T) {
	e := governed(t)
	type row struct{ Field, Default, DefaultSource, RuleSource string }
	effective := func(project string) []row {
		t.Helper()
		got, err := e.gov.GetEffectivePolicy(t.Context(), &workloadv1.GetEffectivePolicyRequest{Name: "projects/" + project + "/policies/training"})
		if err != nil {
			t.Fatal(err)
		}
		var out []row
		for _, f := range got.GetFields() {
			out = append(out, row{f.GetField(), f.GetDefaultValue(), f.GetDefaultSource(), f.GetRuleSource()})
		}
		return out
	}
	want := []row{
		{"image", "pytorch:25", "policies/training", "policies/training"},
		{"gpu.devices", "", "", "policies/training"},
		{"milliCpu", "4000", "projects/team-a/policies/training", ""},
		{"nodeType", "dgx", "projects/team-a/policies/training", "departments/research/policies/training"},
	}
	if diff := cmp.Diff(want, effective("team-a")); diff != "" {
		t.Errorf("team-a (-want +got):\n%s", diff)
	}
	want = []row{
		{"image", "pytorch:25", "policies/training", "policies/training"},
		{"gpu.devices", "", "", "policies/training"},
		{"milliCpu", "2000", "departments/research/policies/training", ""},
		{"nodeType", "", "", "departments/research/policies/training"},
	}
	if diff := cmp.Diff(want, effective("team-b")); diff != "" {
		t.Errorf("team-b (-want +got):\n%s", diff)
	}

	// A submission that gives none of them gets the lowest default.
	w := e.create(t, "team-a", "t1", &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		Spec: &workloadv1.WorkloadSpec{Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}})
	if s := w.GetSpec(); s.GetMilliCpu() != 4000 || s.GetNodeType() != "dgx" || s.GetImage() != "pytorch:25" {
		t.Errorf("spec %v, want milli_cpu 4000, node_type dgx, image pytorch:25 from the policies", s)
	}
}

func TestPolicy_SecondRuleOnAHeldFieldRejected(t *testing.T) {
	e := governed(t)
	for name, tc := range map[string]struct {
		policy, field, holder string
	}{
		"project below a department's rule": {"projects/team-a/policies/training", "nodeType", "departments/research/policies/training"},
		"department below the account's":    {"departments/ops/policies/training", "gpu.devices", "policies/training"},
		"account above a department's":      {"policies/training", "nodeType", "departments/research/policies/training"},
	} {
		t.Run(name, func(t *testing.T) {
			before, rev := e.storeState(t)
			p := &workloadv1.Policy{Name: tc.policy, Rules: map[string]*workloadv1.FieldRule{tc.field: {Required: yes()}}}
			if tc.policy == "policies/training" { // keep the account's own rules
				cur, err := e.gov.GetPolicy(t.Context(), &workloadv1.GetPolicyRequest{Name: tc.policy})
				if err != nil {
					t.Fatal(err)
				}
				p = proto.Clone(cur).(*workloadv1.Policy)
				p.Rules[tc.field] = &workloadv1.FieldRule{Required: yes()}
			}
			_, err := e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{Policy: p, AllowMissing: true})
			md := wantError(t, err, codes.FailedPrecondition, "POLICY_RULE_CONFLICT")
			if md["field"] != tc.field || md["scope"] != tc.holder || !strings.Contains(err.Error(), tc.holder) {
				t.Errorf("error %v metadata %v, want field %s held by %s", err, md, tc.field, tc.holder)
			}
			after, rev2 := e.storeState(t)
			if rev != rev2 || !cmp.Equal(before, after) {
				t.Error("a rejected policy wrote to the store")
			}
		})
	}
	// Another branch may rule the same field: team-c is not under research.
	e.setPolicy(t, "projects/team-c/policies/training", &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{"nodeType": {Required: yes()}}})
}

// policyViolation checks that err is INVALID_FIELD with one violation on
// field whose description names the rule and the policy.
func policyViolation(t *testing.T, err error, field, rule, source string) {
	t.Helper()
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	v := violations(err)
	if d, ok := v[field]; !ok || !strings.Contains(d, rule) || !strings.Contains(d, source) {
		t.Errorf("violations %v, want %s naming %s and %s", v, field, rule, source)
	}
}

func TestPolicy_SubmitRejected_gRPC(t *testing.T) {
	e := governed(t)
	dgx := func(s *workloadv1.WorkloadSpec) *workloadv1.WorkloadSpec { s.NodeType = "dgx"; return s }
	for name, tc := range map[string]struct {
		project           string
		spec              *workloadv1.WorkloadSpec
		field, rule, from string
	}{
		"max": {"team-b", dgx(&workloadv1.WorkloadSpec{Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 4}}}),
			"workload.spec.gpu.devices", `rule "max" on field "gpu.devices"`, "policies/training"},
		"options": {"team-b", dgx(&workloadv1.WorkloadSpec{Image: "tensorflow:2"}),
			"workload.spec.image", `rule "options" on field "image"`, "policies/training"},
		"required": {"team-b", &workloadv1.WorkloadSpec{Image: "jax:0.4"},
			"workload.spec.node_type", `rule "required" on field "nodeType"`, "departments/research/policies/training"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/" + tc.project, WorkloadId: "x",
				Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: tc.spec}})
			policyViolation(t, err, tc.field, tc.rule, tc.from)
		})
	}
	// The same spec within the rules is accepted, and other types are not
	// governed by the training policies.
	e.create(t, "team-b", "ok", &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: dgx(&workloadv1.WorkloadSpec{Image: "jax:0.4"})})
	e.create(t, "team-b", "ws", &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, Spec: &workloadv1.WorkloadSpec{Image: "tensorflow:2"}})
}

func TestPolicy_SubmitRejected_REST(t *testing.T) {
	e := governed(t)
	for name, tc := range map[string]struct {
		body, field, rule, from string
	}{
		"max": {`{"type":"WORKLOAD_TYPE_TRAINING","spec":{"nodeType":"dgx","gpu":{"devices":3}}}`,
			"workload.spec.gpu.devices", `rule \"max\" on field \"gpu.devices\"`, "policies/training"},
		"options": {`{"type":"WORKLOAD_TYPE_TRAINING","spec":{"nodeType":"dgx","image":"tensorflow:2"}}`,
			"workload.spec.image", `rule \"options\"`, "policies/training"},
		"required": {`{"type":"WORKLOAD_TYPE_TRAINING","spec":{"image":"jax:0.4"}}`,
			"workload.spec.node_type", `rule \"required\" on field \"nodeType\"`, "departments/research/policies/training"},
	} {
		t.Run(name, func(t *testing.T) {
			code, body := e.do(t, "POST", "/v1/projects/team-b/workloads?workloadId=x", tc.body)
			if code != 400 {
				t.Fatalf("HTTP %d %s, want 400", code, body)
			}
			grpcCode, details := restDetails(t, body)
			if grpcCode != codes.InvalidArgument {
				t.Errorf("code %v, want InvalidArgument", grpcCode)
			}
			found := false
			for _, d := range details {
				if br, ok := d.(*errdetails.BadRequest); ok {
					for _, v := range br.GetFieldViolations() {
						found = found || (v.GetField() == tc.field && strings.Contains(v.GetDescription(), strings.ReplaceAll(tc.rule, `\"`, `"`)) &&
							strings.Contains(v.GetDescription(), tc.from))
					}
				}
			}
			if !found {
				t.Errorf("details %v, want a violation on %s naming %s and %s", details, tc.field, tc.rule, tc.from)
			}
		})
	}
	// Policies themselves over REST. PATCH replaces the fields the body
	// names: a rule the account holds is refused; defaults are set.
	code, body := e.do(t, "PATCH", "/v1/projects/team-b/policies/training?allowMissing=true", `{"rules":{"gpu.devices":{"max":1}}}`)
	if code != 400 || !strings.Contains(string(body), "POLICY_RULE_CONFLICT") {
		t.Errorf("PATCH a held rule: HTTP %d %s", code, body)
	}
	code, body = e.do(t, "PATCH", "/v1/projects/team-b/policies/training?allowMissing=true", `{"defaults":{"milliCpu":"3000"}}`)
	if code != 200 {
		t.Errorf("PATCH defaults: HTTP %d %s", code, body)
	}
	code, body = e.do(t, "GET", "/v1/projects/team-b/policies/training:effective", "")
	if code != 200 || !strings.Contains(string(body), `"defaultSource":"projects/team-b/policies/training"`) {
		t.Errorf("GET effective: HTTP %d %s", code, body)
	}
	if !strings.Contains(string(body), `"ruleSource":"departments/research/policies/training"`) {
		t.Errorf("GET effective: %s", body)
	}
}

func TestPolicy_InvalidAndMissing(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research"})
	_, err := e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{AllowMissing: true, Policy: &workloadv1.Policy{
		Name: "policies/training", Rules: map[string]*workloadv1.FieldRule{"gpus": {Max: f64(1)}, "image": {Min: f64(1)}}}})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	if v := violations(err); len(v) != 2 {
		t.Errorf("violations %v, want one per bad rule", v)
	}
	_, err = e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{AllowMissing: true, Policy: &workloadv1.Policy{
		Name: "policies/training", Defaults: &workloadv1.WorkloadSpec{Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 1500}}}}})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	if _, ok := violations(err)["policy.defaults.gpu.fraction_milli"]; !ok {
		t.Errorf("violations %v, want policy.defaults.gpu.fraction_milli", violations(err))
	}
	_, err = e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{Policy: &workloadv1.Policy{Name: "policies/training"}})
	wantError(t, err, codes.NotFound, "POLICY_NOT_FOUND")
	_, err = e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{AllowMissing: true, Policy: &workloadv1.Policy{Name: "departments/nope/policies/training"}})
	wantError(t, err, codes.NotFound, "DEPARTMENT_NOT_FOUND")
	_, err = e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{AllowMissing: true, Policy: &workloadv1.Policy{Name: "policies/batch"}})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")

	// An update_mask naming defaults keeps the rules.
	e.setPolicy(t, "projects/team-a/policies/workspace", &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{"image": {Required: yes()}}})
	masked, err := e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"defaults"}},
		Policy: &workloadv1.Policy{Name: "projects/team-a/policies/workspace", Defaults: &workloadv1.WorkloadSpec{Image: "jupyter"}}})
	if err != nil || masked.GetRules()["image"] == nil || masked.GetDefaults().GetImage() != "jupyter" {
		t.Errorf("UpdatePolicy with mask defaults: %v, %v; want the rules kept and the default set", masked, err)
	}
	_, err = e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"update_time"}},
		Policy: &workloadv1.Policy{Name: "projects/team-a/policies/workspace"}})
	wantError(t, err, codes.InvalidArgument, "IMMUTABLE_FIELD")

	// Proto names are accepted and stored as JSON names; get and delete.
	got := e.setPolicy(t, "projects/team-a/policies/inference", &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{"milli_cpu": {Max: f64(8000)}}})
	read, err := e.gov.GetPolicy(t.Context(), &workloadv1.GetPolicyRequest{Name: "projects/team-a/policies/inference"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, read, protocmp.Transform()); diff != "" || read.GetRules()["milliCpu"] == nil {
		t.Errorf("GetPolicy (-set +get):\n%s\nrules %v", diff, read.GetRules())
	}
	if _, err := e.gov.DeletePolicy(t.Context(), &workloadv1.DeletePolicyRequest{Name: read.GetName()}); err != nil {
		t.Fatal(err)
	}
	_, err = e.gov.GetPolicy(t.Context(), &workloadv1.GetPolicyRequest{Name: read.GetName()})
	wantError(t, err, codes.NotFound, "POLICY_NOT_FOUND")
}
