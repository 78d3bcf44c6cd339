package policy_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/policy"
)

func f(v float64) *float64 { return &v }
func b(v bool) *bool       { return &v }

func devices(n int32) *workloadv1.GpuRequest {
	return &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: n}}
}

func fraction(m int32) *workloadv1.GpuRequest {
	return &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: m}}
}

const (
	account = "policies/training"
	dept    = "departments/research/policies/training"
	project = "projects/team-a/policies/training"
)

func TestMerge_DefaultsLowestWinsRulesKeepTheirSource(t *testing.T) {
	layers := []policy.Layer{
		{account, &workloadv1.Policy{
			Defaults: &workloadv1.WorkloadSpec{Image: "base:1", MilliCpu: 1000, Gpu: devices(1)},
			Rules:    map[string]*workloadv1.FieldRule{"gpu.devices": {Max: f(4)}},
		}},
		{dept, &workloadv1.Policy{
			Defaults: &workloadv1.WorkloadSpec{MilliCpu: 2000, NodeType: "dgx"},
			Rules:    map[string]*workloadv1.FieldRule{"milliCpu": {Min: f(500)}},
		}},
		{project, &workloadv1.Policy{
			Defaults: &workloadv1.WorkloadSpec{MilliCpu: 4000, Gpu: fraction(500)},
			Rules:    map[string]*workloadv1.FieldRule{"image": {Options: []string{"base:1", "base:2"}}},
		}},
	}
	eff := policy.Merge(layers)
	type row struct{ Def, DefSrc, RuleSrc string }
	got := map[string]row{}
	for _, name := range eff.Names() {
		e := eff.Fields[name]
		got[name] = row{eff.DefaultText(name), e.DefaultSource, e.RuleSource}
	}
	want := map[string]row{
		"image":             {"base:1", account, project},
		"gpu.devices":       {"", "", account}, // the project's fraction replaced the account's devices
		"gpu.fractionMilli": {"500", project, ""},
		"milliCpu":          {"4000", project, dept},
		"nodeType":          {"dgx", dept, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("effective policy (-want +got):\n%s", diff)
	}

	// A submission that sets nothing gets every default; one that sets a
	// GPU amount keeps it whole (no default mixes into the oneof).
	filled := eff.Apply(&workloadv1.WorkloadSpec{Command: []string{"train"}})
	wantSpec := &workloadv1.WorkloadSpec{Image: "base:1", Command: []string{"train"}, MilliCpu: 4000, Gpu: fraction(500), NodeType: "dgx"}
	if diff := cmp.Diff(wantSpec, filled, protocmp.Transform()); diff != "" {
		t.Errorf("Apply on an empty spec (-want +got):\n%s", diff)
	}
	own := eff.Apply(&workloadv1.WorkloadSpec{Image: "base:2", Gpu: devices(2), MilliCpu: 1500})
	if own.GetGpu().GetDevices() != 2 || own.GetGpu().GetFractionMilli() != 0 || own.GetImage() != "base:2" || own.GetMilliCpu() != 1500 {
		t.Errorf("Apply overrode submitted values: %v", own)
	}
}

func TestConflict_RuleHeldByAnotherScope(t *testing.T) {
	others := []policy.Layer{
		{account, &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{"gpu.devices": {Max: f(4)}}}},
		{project, &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{"image": {Required: b(true)}}}},
	}
	for name, tc := range map[string]struct {
		rules      map[string]*workloadv1.FieldRule
		wantField  string
		wantSource string
	}{
		"free field":              {rules: map[string]*workloadv1.FieldRule{"milliCpu": {Min: f(1)}}},
		"held by the account":     {rules: map[string]*workloadv1.FieldRule{"gpu.devices": {Max: f(2)}}, wantField: "gpu.devices", wantSource: account},
		"held by a project below": {rules: map[string]*workloadv1.FieldRule{"milliCpu": {}, "image": {}}, wantField: "image", wantSource: project},
	} {
		t.Run(name, func(t *testing.T) {
			field, src, found := policy.Conflict(tc.rules, others)
			if found != (tc.wantField != "") || field != tc.wantField || src != tc.wantSource {
				t.Errorf("Conflict = %q, %q, %v; want %q, %q", field, src, found, tc.wantField, tc.wantSource)
			}
		})
	}
}

func TestNormalize(t *testing.T) {
	p := &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{
		"milli_cpu":    {Min: f(100)},                  // proto name: rewritten to milliCpu
		"gpu.devices":  {Min: f(4), Max: f(2)},         // min above max
		"memoryBytes":  {Step: f(0)},                   // step must be positive
		"image":        {Max: f(3)},                    // bounds on a string
		"gpu.nonsense": {Required: b(true)},            // not a field
		"nodeType":     {Options: []string{"dgx"}},     // fine
		"priority":     {CanEdit: b(false)},            // fine
		"pods":         {Required: b(true), Max: f(8)}, // fine
	}}
	got := map[string]string{}
	for _, v := range policy.Normalize(p) {
		got[v.Field] = v.Description
	}
	for _, want := range []string{`policy.rules["gpu.devices"].max`, `policy.rules["memoryBytes"].step`,
		`policy.rules["image"]`, `policy.rules["gpu.nonsense"]`} {
		if got[want] == "" {
			t.Errorf("no violation on %s; got %v", want, got)
		}
	}
	if len(got) != 4 {
		t.Errorf("%d violations, want 4: %v", len(got), got)
	}
	if _, ok := p.GetRules()["milliCpu"]; !ok {
		t.Errorf("rules %v: milli_cpu not rewritten to milliCpu", p.GetRules())
	}
}

func TestCheck(t *testing.T) {
	eff := policy.Merge([]policy.Layer{
		{account, &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{
			"gpu.devices": {Max: f(2)},
			"image":       {Options: []string{"pytorch:25", "jax:0.4"}},
		}}},
		{dept, &workloadv1.Policy{
			Defaults: &workloadv1.WorkloadSpec{Priority: "train"},
			Rules: map[string]*workloadv1.FieldRule{
				"nodeType": {Required: b(true)},
				"milliCpu": {Min: f(1000), Step: f(500)},
				"priority": {CanEdit: b(false)},
			},
		}},
	})
	ok := &workloadv1.WorkloadSpec{Image: "jax:0.4", Gpu: devices(2), NodeType: "dgx", MilliCpu: 2500}
	for name, tc := range map[string]struct {
		change    func(*workloadv1.WorkloadSpec)
		wantField string
		wantRule  string
		wantSrc   string
	}{
		"within every rule": {change: func(*workloadv1.WorkloadSpec) {}},
		"max":               {change: func(s *workloadv1.WorkloadSpec) { s.Gpu = devices(3) }, wantField: "workload.spec.gpu.devices", wantRule: `rule "max" on field "gpu.devices"`, wantSrc: account},
		"options":           {change: func(s *workloadv1.WorkloadSpec) { s.Image = "tf:2" }, wantField: "workload.spec.image", wantRule: `rule "options" on field "image"`, wantSrc: account},
		"required":          {change: func(s *workloadv1.WorkloadSpec) { s.NodeType = "" }, wantField: "workload.spec.node_type", wantRule: `rule "required" on field "nodeType"`, wantSrc: dept},
		"min":               {change: func(s *workloadv1.WorkloadSpec) { s.MilliCpu = 500 }, wantField: "workload.spec.milli_cpu", wantRule: `rule "min"`, wantSrc: dept},
		"step":              {change: func(s *workloadv1.WorkloadSpec) { s.MilliCpu = 1200 }, wantField: "workload.spec.milli_cpu", wantRule: `rule "step"`, wantSrc: dept},
		"canEdit":           {change: func(s *workloadv1.WorkloadSpec) { s.Priority = "interactive-preemptible" }, wantField: "workload.spec.priority", wantRule: `rule "canEdit"`, wantSrc: dept},
		"canEdit, default":  {change: func(s *workloadv1.WorkloadSpec) { s.Priority = "train" }},
	} {
		t.Run(name, func(t *testing.T) {
			sub := proto.Clone(ok).(*workloadv1.WorkloadSpec)
			tc.change(sub)
			got := eff.Check("workload.spec.", sub, eff.Apply(sub))
			if tc.wantField == "" {
				if len(got) != 0 {
					t.Fatalf("violations %v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("violations %v, want one on %s", got, tc.wantField)
			}
			if got[0].Field != tc.wantField || !strings.Contains(got[0].Description, tc.wantRule) || !strings.Contains(got[0].Description, tc.wantSrc) {
				t.Errorf("violation %+v, want field %s naming %s and %s", got[0], tc.wantField, tc.wantRule, tc.wantSrc)
			}
		})
	}
}

// A relaxation of the container's isolation is refused unless a rule of
// the branch lists it; a policy can allow only values the field can hold.
func TestCheck_RelaxationsNeedARuleThatAllowsThem(t *testing.T) {
	root := &workloadv1.WorkloadSpec{Image: "x", Security: &workloadv1.ContainerSecurity{RunAsRoot: true}}
	caps := &workloadv1.WorkloadSpec{Image: "x", Security: &workloadv1.ContainerSecurity{AddCapabilities: []string{"NET_RAW"}}}
	none := policy.Merge(nil)
	for name, spec := range map[string]*workloadv1.WorkloadSpec{"security.run_as_root": root, "security.add_capabilities": caps} {
		vs := none.Check("workload.spec.", spec, spec)
		if len(vs) != 1 || vs[0].Field != "workload.spec."+name || !strings.Contains(vs[0].Description, "no policy") {
			t.Errorf("%s with no policy: %+v, want one violation saying no policy allows it", name, vs)
		}
	}
	// A rule without options (required, canEdit) allows nothing.
	bare := policy.Merge([]policy.Layer{{project, &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{"security.runAsRoot": {CanEdit: b(true)}}}}})
	if vs := bare.Check("", root, root); len(vs) != 1 {
		t.Errorf("root under a rule with no options: %+v, want refused", vs)
	}
	allow := policy.Merge([]policy.Layer{{project, &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{
		"security.runAsRoot":       {Options: []string{"true", "false"}},
		"security.addCapabilities": {Options: []string{"NET_RAW"}},
	}}}})
	for _, spec := range []*workloadv1.WorkloadSpec{root, caps, {Image: "x"}} {
		if vs := allow.Check("", spec, spec); len(vs) != 0 {
			t.Errorf("%v under the allowing policy: %+v, want none", spec, vs)
		}
	}
	more := &workloadv1.WorkloadSpec{Image: "x", Security: &workloadv1.ContainerSecurity{AddCapabilities: []string{"NET_RAW", "SYS_ADMIN"}}}
	if vs := allow.Check("", more, more); len(vs) != 1 || !strings.Contains(vs[0].Description, "must be one of NET_RAW") {
		t.Errorf("a capability the policy does not list: %+v, want refused", vs)
	}

	bad := &workloadv1.Policy{Rules: map[string]*workloadv1.FieldRule{
		"security.runAsRoot":       {Options: []string{"yes"}},
		"security.addCapabilities": {Options: []string{"NET_RAW", "ALL", "cap_sys_admin"}},
	}}
	var fields []string
	for _, v := range policy.Normalize(bad) {
		fields = append(fields, v.Field)
	}
	want := []string{`policy.rules["security.addCapabilities"].options[1]`, `policy.rules["security.addCapabilities"].options[2]`,
		`policy.rules["security.runAsRoot"].options[0]`}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("Normalize of bad relaxation options (-want +got):\n%s", diff)
	}
}
