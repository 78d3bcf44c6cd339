package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// A node pool's tolerations from the CLI: --toleration on create and
// update (repeatable, replacing the list; an empty one clears it), `nodepool get`
// showing them as they were written, and a bad one refused on one line.
func TestCLI_NodePoolTolerations(t *testing.T) {
	d := startDev(t)
	d.ok(t, "nodepool", "create", "ml", "--label", "pool=ml", "--toleration", "dedicated=ml:NoSchedule", "--toleration", "nvidia.com/gpu")
	if out := d.ok(t, "nodepool", "get", "ml"); !strings.Contains(out, "Tolerations:") || !strings.Contains(out, "dedicated=ml:NoSchedule, nvidia.com/gpu") {
		t.Errorf("nodepool get ml:\n%s", out)
	}
	var p struct {
		Tolerations []struct{ Key, Value, Operator, Effect string }
	}
	if err := json.Unmarshal([]byte(d.ok(t, "nodepool", "get", "ml", "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Tolerations) != 2 || p.Tolerations[0].Effect != "TAINT_EFFECT_NO_SCHEDULE" || p.Tolerations[1].Operator != "TOLERATION_OPERATOR_EXISTS" {
		t.Errorf("nodepool get ml -o json: %+v", p)
	}
	d.ok(t, "nodepool", "update", "ml", "--toleration", "runai=drain:NoExecute")
	if out := d.ok(t, "nodepool", "get", "ml"); !strings.Contains(out, "runai=drain:NoExecute\n") {
		t.Errorf("after replacing the tolerations:\n%s", out)
	}
	d.ok(t, "nodepool", "update", "ml", "--toleration", "")
	if out := d.ok(t, "nodepool", "get", "ml"); !strings.Contains(out, "Tolerations:            -\n") {
		t.Errorf("after clearing the tolerations:\n%s", out)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"nodepool", "update", "ml", "--toleration", "k:Never"}, `effect "Never"`},
		{[]string{"nodepool", "create", "x", "--label", "a=b", "--toleration", "-k"}, "qualified name"},
	} {
		r := d.run(t, bad.args...)
		if r.code == 0 || !strings.Contains(r.stderr, bad.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("runway %s: exit %d, stderr %q; want a non-zero exit and one line naming %s",
				strings.Join(bad.args, " "), r.code, r.stderr, bad.want)
		}
	}
}
