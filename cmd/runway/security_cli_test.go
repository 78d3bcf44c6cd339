package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// --run-as-root and --add-capability on every submit command: without a
// policy each is refused in one line naming the field (exit 1), with
// nothing submitted; a project's training policy that lists them lets a
// training have them, exactly as asked, while a workspace (another type's
// policy) and another project are still refused.
func TestCLI_SecurityFlags(t *testing.T) {
	d := startDev(t)
	d.ok(t, "project", "create", "team-a", "--gpu", "2")
	d.ok(t, "project", "create", "team-b", "--gpu", "2")
	refused := func(why, kind, project, name string, flags ...string) {
		t.Helper()
		args := []string{kind, "submit", name, "-p", project}
		if !slices.Contains(flags, "--template") {
			args = append(args, "-i", "busybox")
		}
		r := d.run(t, append(args, flags...)...)
		field := "workload.spec.security.run_as_root"
		if slices.Contains(flags, "--add-capability") {
			field = "workload.spec.security.add_capabilities"
		}
		if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, field) ||
			!strings.Contains(r.stderr, why) || !strings.Contains(r.stderr, "[INVALID_FIELD]") {
			t.Errorf("runway %s submit %s %v: exit %d, want 1 and one line naming %s (%s):\n%s%s", kind, name, flags, r.code, field, why, r.stdout, r.stderr)
		}
		if out := d.ok(t, "workload", "list", "-p", project); strings.Contains(out, name) {
			t.Errorf("the refused %s is listed:\n%s", name, out)
		}
	}
	for _, kind := range []string{"training", "workspace", "inference"} {
		refused("no policy", kind, "team-a", kind+"-root", "--run-as-root")
		refused("no policy", kind, "team-a", kind+"-raw", "--add-capability", "NET_RAW")
	}

	d.ok(t, "policy", "set", "--type", "training", "-p", "team-a", "-f", writeFile(t, `
rules:
  security.runAsRoot: {options: ["true"]}
  security.addCapabilities: {options: [NET_RAW, CHOWN]}
`))
	out := d.ok(t, "training", "submit", "rooted", "-p", "team-a", "-i", "busybox", "--run-as-root",
		"--add-capability", "NET_RAW", "--add-capability", "CHOWN", "--", "sleep", "1")
	wantAll(t, "submit under the policy", out, `"rooted" submitted to project team-a`)
	var w struct {
		Spec struct {
			Security struct {
				RunAsRoot       bool
				AddCapabilities []string
			}
		}
	}
	if err := json.Unmarshal([]byte(d.ok(t, "workload", "describe", "rooted", "-p", "team-a", "-o", "json")), &w); err != nil {
		t.Fatal(err)
	}
	if !w.Spec.Security.RunAsRoot || !slices.Equal(w.Spec.Security.AddCapabilities, []string{"NET_RAW", "CHOWN"}) {
		t.Errorf("rooted's security %+v, want root with NET_RAW and CHOWN", w.Spec.Security)
	}
	refused("must be one of NET_RAW, CHOWN", "training", "team-a", "sysadmin", "--add-capability", "SYS_ADMIN")
	refused("no policy", "workspace", "team-a", "ws-root", "--run-as-root")
	refused("no policy", "training", "team-b", "b-root", "--run-as-root")
	// A template may ask for root too; a submission from it is judged as
	// one that asks itself.
	d.ok(t, "template", "create", "rooted", "-p", "team-b", "--type", "training", "-i", "busybox", "--run-as-root")
	refused("no policy", "training", "team-b", "from-template", "--template", "rooted")
}
