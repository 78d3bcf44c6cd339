package main

import (
	"strings"
	"testing"
)

// TestCLI_SetPriorityChangesWhoIsPreempted: two trainings fill the
// cluster; the newer one would be preempted first by a higher priority of
// its project (the victim order: newest first). Raised to
// interactive-preemptible by set-priority, it no longer is: the scheduler
// takes the older one instead, in its next cycle. The change is audited and
// a priority the type may not have is refused.
func TestCLI_SetPriorityChangesWhoIsPreempted(t *testing.T) {
	d := startDev(t)
	d.ok(t, "project", "create", "team-a", "--gpu", "4")
	submit := func(name string, extra ...string) {
		d.ok(t, append([]string{"training", "submit", name, "-p", "team-a", "-i", "busybox", "-g", "2",
			"--cpu", "0.1", "--memory", "100M"}, append(extra, "--", "sleep", "600")...)...)
	}
	submit("old")
	d.eventually(t, `Workload  Type      Status   Project  Running/Req.Pods  GPU Alloc.
old       Training  Running  team-a   1/1               2.00
`, "workload", "list", "-p", "team-a")
	submit("new")
	d.eventually(t, `Workload  Type      Status   Project  Running/Req.Pods  GPU Alloc.
new       Training  Running  team-a   1/1               2.00
old       Training  Running  team-a   1/1               2.00
`, "workload", "list", "-p", "team-a")

	if r := d.run(t, "workload", "set-priority", "new", "inference", "-p", "team-a"); r.code == 0 || !strings.Contains(r.stderr, "priority") {
		t.Errorf("set-priority inference of a training: exit %d, %s; want refused naming the priority", r.code, r.stderr)
	}
	if r := d.run(t, "workload", "set-priority", "new", "urgent", "-p", "team-a"); r.code == 0 {
		t.Errorf("set-priority urgent: exit 0, want an unknown priority refused")
	}
	out := d.ok(t, "workload", "set-priority", "new", "interactive-preemptible", "-p", "team-a")
	if want := "workload \"new\" in project team-a has priority interactive-preemptible\n"; out != want {
		t.Errorf("set-priority printed %q, want %q", out, want)
	}
	submit("urgent", "--priority", "interactive-preemptible")
	d.eventually(t, `Workload  Type      Status   Project  Running/Req.Pods  GPU Alloc.
new       Training  Running  team-a   1/1               2.00
urgent    Training  Running  team-a   1/1               2.00
old       Training  Pending  team-a   0/1               2.00
`, "workload", "list", "-p", "team-a")
	wantAll(t, "describe new", d.ok(t, "workload", "describe", "new", "-p", "team-a"), "Priority changed from train to interactive-preemptible")
	wantAll(t, "audit", d.ok(t, "audit", "list", "-o", "json"), "SetWorkloadPriority", "projects/team-a/workloads/new")
}
