package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCLITemplates: a template made from submit flags submits the same
// workload as those flags; flags given at submit override it; copy,
// rename, list, describe and delete; a template of another type or scope
// is refused with one line.
func TestCLITemplates(t *testing.T) {
	d := startDev(t)
	d.ok(t, "department", "create", "research", "--gpu", "4")
	d.ok(t, "project", "create", "team-a", "--gpu", "2", "--department", "research")
	d.ok(t, "template", "create", "train", "--department", "research", "--type", "training", "-i", "pytorch:25", "-g", "1",
		"--pods", "2", "-e", "SEED=1", "-e", "LR=0.1", "--node-type", "dgx", "--description", "two workers", "--", "python", "train.py")

	wantAll(t, "list", d.ok(t, "template", "list", "--department", "research"), "departments/research/templates/train", "training", "pytorch:25", "1 GPU")
	wantAll(t, "describe", d.ok(t, "template", "describe", "train", "--department", "research"),
		"two workers", "Pods:", "2", "SEED, LR", "python train.py", "dgx")

	spec := func(name string) map[string]any {
		var w struct{ Spec map[string]any }
		if err := json.Unmarshal([]byte(d.ok(t, "workload", "describe", name, "-p", "team-a", "-o", "json")), &w); err != nil {
			t.Fatal(err)
		}
		return w.Spec
	}
	d.ok(t, "training", "submit", "from-template", "-p", "team-a", "--template", "train")
	d.ok(t, "training", "submit", "from-flags", "-p", "team-a", "-i", "pytorch:25", "-g", "1", "--workers", "2",
		"-e", "SEED=1", "-e", "LR=0.1", "--node-type", "dgx", "--", "python", "train.py")
	if diff := cmp.Diff(spec("from-flags"), spec("from-template")); diff != "" {
		t.Errorf("template's spec differs from the flags it stands for (-flags +template):\n%s", diff)
	}
	d.ok(t, "training", "submit", "overridden", "-p", "team-a", "--template", "train", "-i", "pytorch:26", "--workers", "3", "-e", "SEED=7")
	d.ok(t, "training", "submit", "overridden-flags", "-p", "team-a", "-i", "pytorch:26", "-g", "1", "--workers", "3",
		"-e", "LR=0.1", "-e", "SEED=7", "--node-type", "dgx", "--", "python", "train.py")
	if diff := cmp.Diff(spec("overridden-flags"), spec("overridden")); diff != "" {
		t.Errorf("flags over a template differ from the flags written out (-flags +template):\n%s", diff)
	}

	wantAll(t, "another type", d.fails(t, "workspace", "submit", "ws", "-p", "team-a", "--template", "train"),
		"template", "training", "[INVALID_FIELD]")
	wantAll(t, "unknown", d.fails(t, "template", "describe", "nope"), "[TEMPLATE_NOT_FOUND]")

	d.ok(t, "template", "copy", "train", "mine", "--department", "research", "--to-project", "team-a")
	d.ok(t, "template", "rename", "mine", "ours", "-p", "team-a")
	out := d.ok(t, "template", "list", "-p", "team-a")
	if !strings.Contains(out, "projects/team-a/templates/ours") || strings.Contains(out, "templates/mine") {
		t.Errorf("project's templates after copy and rename:\n%s", out)
	}
	wantAll(t, "rename onto a taken name", d.fails(t, "template", "rename", "train", "train", "--department", "research"), "[TEMPLATE_ALREADY_EXISTS]")
	d.ok(t, "template", "delete", "ours", "-p", "team-a")
	wantAll(t, "deleted", d.fails(t, "training", "submit", "gone", "-p", "team-a", "--template", "ours"), "[TEMPLATE_NOT_FOUND]")
}

// TestCLILabels: labels given at submit select workloads with list -l and
// show in describe, as does the time to live; a bad label is one line
// naming it.
func TestCLILabels(t *testing.T) {
	d := startDev(t)
	d.ok(t, "project", "create", "team-a", "--gpu", "2")
	d.ok(t, "training", "submit", "v1", "-p", "team-a", "-i", "busybox", "-l", "team=vision", "-l", "stage=test", "--annotation", "note=first try")
	d.ok(t, "training", "submit", "n1", "-p", "team-a", "-i", "busybox", "--label", "team=nlp", "--auto-delete-after", "24h")
	out := d.ok(t, "workload", "list", "-p", "team-a", "-l", "team=vision")
	if !strings.Contains(out, "v1") || strings.Contains(out, "n1") {
		t.Errorf("list -l team=vision:\n%s", out)
	}
	out = d.ok(t, "training", "list", "-A", "-l", "team!=vision")
	if strings.Contains(out, "v1") || !strings.Contains(out, "n1") {
		t.Errorf("training list -l team!=vision:\n%s", out)
	}
	wantAll(t, "describe", d.ok(t, "workload", "describe", "v1", "-p", "team-a"), "Labels:", "stage=test, team=vision")
	wantAll(t, "describe n1", d.ok(t, "workload", "describe", "n1", "-p", "team-a"), "Deleted:", "24h0m0s after it finishes")
	if r := d.run(t, "training", "submit", "x", "-p", "team-a", "-i", "busybox", "--auto-delete-after", "-1h"); r.code != 2 || !strings.Contains(r.stderr, "--auto-delete-after") {
		t.Errorf("a negative TTL: exit %d, %q; want a usage error naming the flag", r.code, r.stderr)
	}
	wantAll(t, "reserved prefix", d.fails(t, "training", "submit", "x", "-p", "team-a", "-i", "busybox", "-l", "runway.dev/mark=1"),
		"workload.labels[runway.dev/mark]", "platform's", "[INVALID_FIELD]")
	if r := d.run(t, "workload", "list", "-A", "-l", "team"); r.code != 2 || !strings.Contains(r.stderr, "KEY=VALUE") {
		t.Errorf("list -l team: exit %d, %q; want a usage error (2) saying KEY=VALUE", r.code, r.stderr)
	}
}
