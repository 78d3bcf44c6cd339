package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Time-based fair share from the CLI: the node-pool flags on update and
// create (k defaults to 1, half-life 0 turns it off), the errors, and
// `project describe` showing u, s and w' for a pool that has it.
func TestCLI_TimeBasedFairShare(t *testing.T) {
	d := startDev(t)
	if out := d.ok(t, "nodepool", "update", "default", "--fairshare-half-life", "1h", "--fairshare-k", "0.5"); out != "node pool \"default\" updated\n" {
		t.Errorf("update printed %q", out)
	}
	// pools reads each pool's time_based_fair_share from the JSON list.
	type setting struct {
		HalfLife string
		K        float64
	}
	pools := func() map[string]setting {
		var ps []struct {
			Name               string
			TimeBasedFairShare *setting
		}
		if err := json.Unmarshal([]byte(d.ok(t, "nodepool", "list", "-o", "json")), &ps); err != nil {
			t.Fatal(err)
		}
		out := map[string]setting{}
		for _, p := range ps {
			if p.TimeBasedFairShare != nil {
				out[p.Name] = *p.TimeBasedFairShare
			}
		}
		return out
	}
	if got := pools()["nodepools/default"]; got.HalfLife != "3600s" || got.K != 0.5 {
		t.Errorf("nodepools/default time-based fair share %+v, want half-life 3600s and k 0.5", got)
	}
	if out := d.ok(t, "nodepool", "list"); !strings.Contains(out, "half-life 1h0m0s, k 0.5") {
		t.Errorf("nodepool list does not show the setting:\n%s", out)
	}
	d.ok(t, "nodepool", "create", "h100", "--label", "gpu=h100", "--fairshare-half-life", "2h")
	if got := pools()["nodepools/h100"]; got.HalfLife != "7200s" || got.K != 1 {
		t.Errorf("nodepools/h100 time-based fair share %+v, want half-life 7200s and k 1 (the default)", got)
	}
	d.ok(t, "nodepool", "update", "h100", "--fairshare-half-life", "0")
	if got, ok := pools()["nodepools/h100"]; ok {
		t.Errorf("after --fairshare-half-life 0, h100 still has %+v", got)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"nodepool", "update", "default", "--fairshare-k", "20"}, "time_based_fair_share.k"},
		{[]string{"nodepool", "update", "default", "--fairshare-half-life", "5s"}, "time_based_fair_share.half_life"},
		{[]string{"nodepool", "update", "h100", "--fairshare-k", "0.5"}, "time_based_fair_share.half_life"},
		{[]string{"nodepool", "update", "default", "--fairshare-half-life", "0", "--fairshare-k", "1"}, "--fairshare-half-life 0 turns"},
	} {
		r := d.run(t, bad.args...)
		if r.code == 0 || !strings.Contains(r.stderr, bad.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("runway %s: exit %d, stderr %q; want a non-zero exit and one line naming %s",
				strings.Join(bad.args, " "), r.code, r.stderr, bad.want)
		}
	}

	d.ok(t, "project", "create", "team-a", "--gpu", "1")
	d.ok(t, "training", "submit", "a1", "-p", "team-a", "-i", "runai.jfrog.io/demo/quickstart", "-g", "1",
		"--cpu", "0.1", "--memory", "100M", "--", "sleep", "600")
	// team-a alone in its department and the only user: u = 1, s = 1, w' = 1.
	deadline := time.Now().Add(30 * time.Second)
	var out string
	for time.Now().Before(deadline) {
		out = d.ok(t, "project", "describe", "team-a")
		if _, table, ok := strings.Cut(out, "Time-based fair share (GPUs):\n"); ok && strings.Contains(table, "Adjusted Weight (w')") {
			rows := strings.Split(strings.TrimSpace(table), "\n")
			if len(rows) >= 2 && strings.Fields(rows[1])[0] == "default" && strings.Join(strings.Fields(rows[1])[2:5], " ") == "1.00 1.00 1.00" {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("project describe team-a never showed u, s, w' = 1.00 1.00 1.00 for nodepools/default:\n%s", out)
}
