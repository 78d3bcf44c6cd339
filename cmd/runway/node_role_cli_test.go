package main

import (
	"strings"
	"testing"
	"time"
)

// Node roles from the CLI, honoured by the scheduler of `runway dev` (two
// nodes of two GPUs): with node-2 the only gpu-worker, GPU trainings go
// there and a third waits; node-1 shown as it is; unsetting the role lets
// the third run on node-1. A researcher may not set roles.
func TestCLI_NodeRoles(t *testing.T) {
	d := startDev(t)
	d.ok(t, "project", "create", "team-a", "--gpu", "4")
	if out := d.ok(t, "node", "role", "set", "node-2", "--gpu-worker"); out != "node \"node-2\" roles: gpu-worker\n" {
		t.Fatalf("role set printed %q", out)
	}
	if r := d.run(t, "node", "role", "set", "node-2"); r.code == 0 || !strings.Contains(r.stderr, "at least one role") {
		t.Fatalf("role set with no role: exit %d, %s", r.code, r.stderr)
	}
	if out := d.ok(t, "node", "describe", "node-2"); !strings.Contains(out, "Roles:") || !strings.Contains(out, "gpu-worker") {
		t.Fatalf("node describe node-2:\n%s", out)
	}
	for _, w := range []string{"t1", "t2", "t3"} {
		d.ok(t, "training", "submit", w, "-p", "team-a", "-i", "img", "-g", "1", "--cpu", "0.1", "--memory", "100M", "--", "sleep", "600")
	}
	waitFor(t, d, func(out string) bool {
		return strings.Count(out, "Training  Running") == 2 && strings.Contains(out, "Training  Pending")
	}, "workload", "list", "-A")
	if out := d.ok(t, "node", "describe", "node-1"); strings.Contains(out, "team-a/t") {
		t.Fatalf("a GPU training went to node-1, not a gpu-worker:\n%s", out)
	}
	if out := d.ok(t, "workload", "describe", "t3", "-p", "team-a"); !strings.Contains(out, "gpu-worker") {
		t.Errorf("the pending training does not say it waits for a gpu-worker:\n%s", out)
	}
	d.ok(t, "node", "role", "unset", "node-2", "--gpu-worker")
	waitFor(t, d, func(out string) bool { return strings.Count(out, "Training  Running") == 3 }, "workload", "list", "-A")

	alice := researcher(t, d, "alice", "team-a")
	if r := alice.run(t, "", "node", "role", "set", "node-1", "--system"); r.code == 0 {
		t.Fatalf("a researcher set a node role: %s", r.stdout)
	}
	if out := d.ok(t, "node", "list"); !strings.Contains(out, "Roles") || strings.Contains(out, "system") {
		t.Fatalf("node list after the refused change:\n%s", out)
	}
}

// waitFor runs the CLI until ok accepts its output (30 s at most).
func waitFor(t *testing.T, d *devServer, ok func(string) bool, args ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		if got = d.ok(t, args...); ok(got) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("runway %s never printed what the test waits for; last:\n%s", strings.Join(args, " "), got)
}
