package main

import (
	"strings"
	"testing"
)

// The general settings from the CLI: the administrator reads the defaults,
// sets several options at once and resets one; a researcher reads them but
// is refused a change; the change is in the audit log; a bad KEY=VALUE is
// refused on one line.
func TestCLI_Settings(t *testing.T) {
	d := startDev(t)
	admin := d.session(t, d.token)
	out := admin.ok(t, "", "settings", "get")
	for _, want := range []string{"default-node-pool:", "default\n", "gpu-resource-optimization:", "workspace-auto-suspend:", "off\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("settings get lacks %q:\n%s", want, out)
		}
	}
	admin.ok(t, "", "settings", "set", "login-banner=Authorised use only.", "workspace-auto-suspend=8h", "allow-over-quota=true",
		"gpu-resource-optimization=false")
	out = admin.ok(t, "", "settings", "get", "-o", "json")
	for _, want := range []string{`"loginBanner": "Authorised use only."`, `"workspaceAutoSuspend": "28800s"`,
		`"allowOverQuotaByDefault": true`, `"gpuResourceOptimization": false`} {
		if !strings.Contains(out, want) {
			t.Fatalf("settings get -o json lacks %s:\n%s", want, out)
		}
	}
	admin.ok(t, "", "settings", "set", "workspace-auto-suspend=")
	if out := admin.ok(t, "", "settings", "get"); !strings.Contains(out, "off\n") || !strings.Contains(out, `"Authorised use only."`) {
		t.Fatalf("after resetting workspace-auto-suspend:\n%s", out)
	}
	for _, bad := range [][]string{{"settings", "set", "colour=blue"}, {"settings", "set", "allow-over-quota=maybe"},
		{"settings", "set", "workspace-auto-suspend=soon"}, {"settings", "set", "workspace-auto-suspend=1s"}} {
		r := admin.run(t, "", bad...)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("runway %s: exit %d, stderr %q; want a non-zero exit and one line", strings.Join(bad, " "), r.code, r.stderr)
		}
	}

	admin.ok(t, "", "project", "create", "team-a")
	// Rules by preemptibility (issue 31 point 5) from the CLI, shown in force.
	admin.ok(t, "", "project", "rules", "set", "team-a", "--type", "workspace", "--time-limit", "24h",
		"--preemptible-time-limit", "4h", "--preemptible-idle-gpu-limit", "30m")
	if out := admin.ok(t, "", "project", "describe", "team-a"); !strings.Contains(out, "24h0m0s, preemptible 4h0m0s") ||
		!strings.Contains(out, "-, preemptible 30m0s") {
		t.Fatalf("project describe after rules set:\n%s", out)
	}
	if r := admin.run(t, "", "project", "rules", "set", "team-a", "--type", "training", "--preemptible-time-limit", "1h"); r.code == 0 ||
		!strings.Contains(r.stderr, "preemptible_time_limit") {
		t.Fatalf("a training rule with a preemptible limit: exit %d, %s", r.code, r.stderr)
	}
	alice := researcher(t, d, "alice", "team-a")
	if out := alice.ok(t, "", "settings", "get"); !strings.Contains(out, "Authorised use only.") {
		t.Fatalf("a researcher's settings get:\n%s", out)
	}
	r := alice.run(t, "", "settings", "set", "login-banner=mine now")
	if r.code == 0 || !strings.Contains(r.stderr, "PermissionDenied") && !strings.Contains(strings.ToLower(r.stderr), "permission") {
		t.Fatalf("a researcher's settings set: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
	if out := admin.ok(t, "", "settings", "get"); strings.Contains(out, "mine now") {
		t.Fatalf("the refused change was written:\n%s", out)
	}
	if out := admin.ok(t, "", "audit", "list", "-o", "json"); !strings.Contains(out, "UpdateSettings") {
		t.Fatalf("audit list lacks UpdateSettings:\n%s", out)
	}
}
