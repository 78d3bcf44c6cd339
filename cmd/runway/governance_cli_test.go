package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fails runs the CLI, wants exit code 1 and returns the error line.
func (d *devServer) fails(t *testing.T, args ...string) string {
	t.Helper()
	r := d.run(t, args...)
	if r.code != 1 {
		t.Fatalf("runway %s: exit %d, want 1\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stderr
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantAll(t *testing.T, what, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("%s: %q does not contain %q", what, got, p)
		}
	}
}

// TestCLIGovernance: policies set with YAML files, the effective policy
// with its sources, submissions rejected by max, options and required with
// the field, the rule and the policy in the error line, the example assets
// used at submit, and scheduling rules shown by project describe.
func TestCLIGovernance(t *testing.T) {
	d := startDev(t)
	d.ok(t, "department", "create", "research", "--gpu", "4")
	d.ok(t, "project", "create", "team-a", "--gpu", "2", "--department", "research")

	d.ok(t, "policy", "set", "--type", "training", "-f", writeFile(t, `
defaults:
  milliCpu: 1000
rules:
  gpu.devices: {max: 1}
  image: {options: [runai.jfrog.io/demo/quickstart, "pytorch:25"]}
`))
	d.ok(t, "policy", "set", "--type", "training", "--department", "research", "-f", writeFile(t, `
defaults:
  milliCpu: 2000
rules:
  nodeType: {required: true}
`))
	out := d.fails(t, "policy", "set", "--type", "training", "-p", "team-a", "-f", writeFile(t, "rules:\n  nodeType: {options: [dgx]}\n"))
	wantAll(t, "second rule on a held field", out, "departments/research/policies/training", "[POLICY_RULE_CONFLICT]")

	out = d.ok(t, "policy", "effective", "-p", "team-a", "--type", "training")
	wantAll(t, "effective", out, "Default From", "milliCpu", "2000", "departments/research/policies/training", "max 1", "policies/training")

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"max", []string{"-i", "pytorch:25", "-g", "2", "--node-type", "dgx"}, []string{"workload.spec.gpu.devices", `rule "max" on field "gpu.devices"`, "policy policies/training", "[INVALID_FIELD]"}},
		{"options", []string{"-i", "tensorflow:2", "-g", "1", "--node-type", "dgx"}, []string{"workload.spec.image", `rule "options" on field "image"`, "policy policies/training"}},
		{"required", []string{"-i", "pytorch:25", "-g", "1"}, []string{"workload.spec.node_type", `rule "required" on field "nodeType"`, "policy departments/research/policies/training"}},
	} {
		out := d.fails(t, append([]string{"training", "submit", "x", "-p", "team-a"}, tc.args...)...)
		wantAll(t, tc.name, out, tc.want...)
	}

	// The example assets runway dev creates, used at submit.
	wantAll(t, "environments", d.ok(t, "environment", "list"), "environments/quick-start", "runai.jfrog.io/demo/quickstart")
	wantAll(t, "compute resources", d.ok(t, "compute-resource", "list"), "computeResources/one-gpu", "computeResources/two-gpus")
	d.ok(t, "training", "submit", "q1", "-p", "team-a", "--environment", "quick-start", "--compute", "one-gpu", "--node-type", "dgx")
	var w struct {
		Spec struct {
			Image    string
			Command  []string
			MilliCpu string
			Gpu      struct{ Devices int }
		}
	}
	if err := json.Unmarshal([]byte(d.ok(t, "workload", "describe", "q1", "-p", "team-a", "-o", "json")), &w); err != nil {
		t.Fatal(err)
	}
	if w.Spec.Image != "runai.jfrog.io/demo/quickstart" || w.Spec.Gpu.Devices != 1 || w.Spec.MilliCpu != "2000" || len(w.Spec.Command) == 0 {
		t.Errorf("q1 spec %+v: want the quick-start image and command, one GPU, the department's CPU default", w.Spec)
	}
	d.ok(t, "compute-resource", "create", "half", "-p", "team-a", "-g", "0.5")
	d.ok(t, "environment", "delete", "quick-start")
	out = d.fails(t, "training", "submit", "q2", "-p", "team-a", "-e", "quick-start", "--compute", "half", "--node-type", "dgx")
	wantAll(t, "deleted environment", out, "[ENVIRONMENT_NOT_FOUND]")

	// Scheduling rules, and describe showing them with their source.
	d.ok(t, "department", "rules", "set", "research", "--type", "workspace", "--idle-gpu-limit", "30m", "--preempt-when-idle")
	d.ok(t, "project", "rules", "set", "team-a", "--type", "training", "--time-limit", "8h", "--node-type", "dgx,a100")
	out = d.ok(t, "project", "describe", "team-a")
	wantAll(t, "describe", out, "Scheduling rules in force", "training", "8h0m0s", "dgx,a100", "projects/team-a",
		"workspace", "30m0s (preempt)", "departments/research")
	out = d.fails(t, "training", "submit", "q3", "-p", "team-a", "-i", "pytorch:25", "--node-type", "h100")
	wantAll(t, "node type rule", out, "workload.spec.node_type", "dgx, a100", "projects/team-a")
	d.ok(t, "project", "rules", "delete", "team-a", "--type", "training")
	if out := d.ok(t, "project", "describe", "team-a"); strings.Contains(out, "8h0m0s") {
		t.Errorf("describe after delete still shows the training rule:\n%s", out)
	}
	// Priority overrides at submit, within what each type allows.
	d.ok(t, "workspace", "submit", "w1", "-p", "team-a", "-i", "jupyter", "--priority", "interactive-preemptible")
	wantAll(t, "workspace priority", d.fails(t, "workspace", "submit", "w2", "-p", "team-a", "-i", "jupyter", "--priority", "train"),
		"workload.spec.priority", "build or interactive-preemptible")
	wantAll(t, "training priority", d.fails(t, "training", "submit", "t2", "-p", "team-a", "-i", "pytorch:25", "--node-type", "dgx", "--priority", "build"),
		"interactive-preemptible or train")

	d.ok(t, "policy", "delete", "--type", "training", "--department", "research")
	out = d.fails(t, "policy", "get", "--type", "training", "--department", "research")
	wantAll(t, "deleted policy", out, "[POLICY_NOT_FOUND]")
	wantAll(t, "policy get", d.ok(t, "policy", "get", "--type", "training"), "gpu.devices:", "max: 1")
}
