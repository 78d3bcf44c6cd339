package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The policy editor's YAML from the CLI: apply a document, get it back as
// YAML and apply that again, a rule the server refuses named at its line,
// and `policy list` showing a researcher only the policies of her scopes.
func TestCLI_PolicyYAML(t *testing.T) {
	d := startDev(t)
	d.ok(t, "department", "create", "research")
	d.ok(t, "department", "create", "ops")
	d.ok(t, "project", "create", "team-a", "--department", "research")
	d.ok(t, "project", "create", "team-o", "--department", "ops")
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := write("first.yaml", "name: departments/research/policies/training\ndefaults:\n  milliCpu: 2000\nrules:\n  gpu.devices: {max: 2}\n")
	if out := d.ok(t, "policy", "apply", "-f", first); out != "policy \"departments/research/policies/training\" applied\n" {
		t.Fatalf("apply printed %q", out)
	}
	got := d.ok(t, "policy", "get", "--type", "training", "--department", "research", "-o", "yaml")
	for _, want := range []string{"name: departments/research/policies/training", "scope: departments/research",
		"workloadType: WORKLOAD_TYPE_TRAINING", "milliCpu: \"2000\"", "gpu.devices:"} {
		if !strings.Contains(got, want) {
			t.Fatalf("policy get -o yaml lacks %q:\n%s", want, got)
		}
	}
	// What get printed applies as it is (its etag is still the policy's).
	d.ok(t, "policy", "apply", "-f", write("again.yaml", got))

	bad := write("bad.yaml", "name: departments/research/policies/training\nrules:\n  gpu.devices:\n    min: 4\n    max: 2\n")
	r := d.run(t, "policy", "apply", "-f", bad)
	if r.code == 0 || !strings.Contains(r.stderr, bad+`:5: rules["gpu.devices"].max: must be at least min (4)`) {
		t.Fatalf("apply of a rule with max < min: exit %d, stderr %q", r.code, r.stderr)
	}
	r = d.run(t, "policy", "apply", "-f", write("typo.yaml", "name: policies/training\ndefaults:\n  milliCPU: 1\n"))
	if r.code == 0 || !strings.Contains(r.stderr, "typo.yaml:3: defaults.milliCPU: unknown field of WorkloadSpec") {
		t.Fatalf("apply of an unknown field: exit %d, stderr %q", r.code, r.stderr)
	}

	d.ok(t, "policy", "apply", "-f", write("ops.yaml", "name: departments/ops/policies/training\ndefaults:\n  milliCpu: 500\n"))
	d.ok(t, "policy", "apply", "-f", write("team-o.yaml", "name: projects/team-o/policies/workspace\ndefaults:\n  milliCpu: 500\n"))
	d.ok(t, "policy", "apply", "-f", write("team-a.yaml", "name: projects/team-a/policies/workspace\ndefaults:\n  milliCpu: 500\n"))
	if out := d.ok(t, "policy", "list"); strings.Count(out, "\n") != 5 || !strings.Contains(out, "departments/ops/policies/training") {
		t.Fatalf("the administrator's policy list:\n%s", out)
	}
	alice := researcher(t, d, "alice", "team-a")
	out := alice.ok(t, "", "policy", "list")
	if strings.Contains(out, "ops") || !strings.Contains(out, "projects/team-a/policies/workspace") ||
		!strings.Contains(out, "departments/research/policies/training  departments/research  training") {
		t.Fatalf("alice's policy list:\n%s", out)
	}
}
