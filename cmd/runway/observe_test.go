package main

import (
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The quick start, then what it leaves seen from `runway top`, `runway
// workload metrics` and `runway report`, from the built binary against a
// runway dev that keeps its history every 100 ms.
func TestCLI_TopMetricsReports(t *testing.T) {
	d := startDev(t, "--history-interval", "100ms")
	d.ok(t, "project", "create", "team-a", "--gpu", "2")
	d.ok(t, "project", "create", "team-b", "--gpu", "2")
	for _, w := range [][3]string{{"a1", "team-a", "1"}, {"a2", "team-a", "2"}, {"b1", "team-b", "1"}, {"b2", "team-b", "1"}} {
		d.ok(t, "training", "submit", w[0], "-p", w[1], "-i", "img", "-g", w[2], "--cpu", "0.1", "--memory", "100M", "--", "sleep", "600")
		if w[0] == "b1" {
			d.eventually(t, "Workload  Type      Status   Project  Running/Req.Pods  GPU Alloc.\n"+
				"a1        Training  Running  team-a   1/1               1.00\n"+
				"a2        Training  Running  team-a   1/1               2.00\n"+
				"b1        Training  Running  team-b   1/1               1.00\n", "workload", "list", "-A")
			// b2 reclaims a1: first let the history see a1 hold its GPU
			// (a loaded machine can stretch one collection past the time a1
			// would otherwise hold it).
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				r := d.run(t, "workload", "metrics", "a1", "-p", "team-a", "--since", "1m", "--type", "allocated-gpus")
				if r.code == 0 && strings.Contains(r.stdout, "1.00") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the history never showed a1 holding 1 GPU: exit %d\n%s%s", r.code, r.stdout, r.stderr)
				}
			}
		}
	}
	d.eventually(t, `Project  Node Pool  GPU Alloc.  GPU Quota  Running  Pending
team-a   default    2.00        2.00       1        1
team-b   default    2.00        2.00       2        0
`, "top", "projects")
	d.eventually(t, `Node Pool  GPU Alloc.  GPU Idle  Ready  Not Ready  Running
default    4.00        0.00      2      0          3
`, "top", "node-pools")
	d.eventually(t, `Node    GPU Alloc.  GPU Used  GPUs  GPU Util.
node-1  2.00        0.00      2.00  0%
node-2  2.00        0.00      2.00  0%
`, "top", "nodes")

	// a2 has held 2 GPUs all along: its allocation series is flat at 2.
	out := d.ok(t, "workload", "metrics", "a2", "-p", "team-a", "--since", "1m", "--type", "allocated-gpus")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "Metric") {
		t.Fatalf("workload metrics printed\n%s", out)
	}
	f := strings.Fields(lines[1])
	if len(f) != 6 || f[0] != "allocated-gpus" || f[1] != "-" || f[2] != "2.00" || f[3] != "2.00" || f[4] != "2.00" ||
		strings.Trim(f[5], "_") != "" {
		t.Errorf("allocated-gpus row %q, want last, min and max 2.00 and a flat sparkline", lines[1])
	}
	var m struct {
		Name   string
		Series []struct {
			Type string
			Pod  string
		}
	}
	if err := json.Unmarshal([]byte(d.ok(t, "workload", "metrics", "a2", "-p", "team-a", "--since", "1m", "-o", "json")), &m); err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, s := range m.Series {
		types[s.Type+"/"+s.Pod] = true
	}
	if m.Name != "projects/team-a/workloads/a2" || !types["METRIC_TYPE_GPU_UTILIZATION/0"] || !types["METRIC_TYPE_ALLOCATED_GPUS/"] {
		t.Errorf("workload metrics -o json: %+v", m)
	}

	// A report over the last minute, by department.
	time.Sleep(500 * time.Millisecond)
	if out := d.ok(t, "report", "create", "last-minute", "--since", "1m", "--segment-by", "department"); out != `report "last-minute" created (pending)`+"\n" {
		t.Errorf("report create printed %q", out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(d.ok(t, "report", "describe", "last-minute", "-o", "yaml"), "state: REPORT_STATE_READY") {
		if time.Now().After(deadline) {
			t.Fatalf("report not ready: %s", d.ok(t, "report", "describe", "last-minute"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if list := d.ok(t, "report", "list"); !strings.Contains(list, "last-minute  Ready   Department") {
		t.Errorf("report list\n%s", list)
	}
	recs, err := csv.NewReader(strings.NewReader(d.ok(t, "report", "download", "last-minute"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0][0] != "segment" || recs[1][0] != "default" || recs[1][1] != "default" || recs[1][6] != "4" {
		t.Errorf("CSV %v, want the default department's one row, with the 4 workloads that held GPUs", recs)
	}
	d.ok(t, "report", "delete", "last-minute")
	if r := d.run(t, "report", "describe", "last-minute"); r.code == 0 || !strings.Contains(r.stderr, "REPORT_NOT_FOUND") {
		t.Errorf("describe after delete: exit %d %q", r.code, r.stderr)
	}
	if r := d.run(t, "report", "create", "x", "--segment-by", "team"); r.code == 0 || !strings.Contains(r.stderr, "--segment-by") {
		t.Errorf("a bad --segment-by: exit %d %q", r.code, r.stderr)
	}
	if r := d.run(t, "workload", "metrics", "a2", "-p", "team-a", "--type", "nonsense"); r.code == 0 || !strings.Contains(r.stderr, "--type") {
		t.Errorf("a bad --type: exit %d %q", r.code, r.stderr)
	}
}

// A workload that burns a CPU and holds 64 MiB shows both, measured by the
// agent, in `runway workload metrics` (not its allocation).
func TestCLI_WorkloadUsage(t *testing.T) {
	d := startDev(t, "--history-interval", "100ms")
	d.ok(t, "project", "create", "team-a", "--gpu", "2")
	d.ok(t, "training", "submit", "burn", "-p", "team-a", "-i", "img", "-g", "1", "--cpu", "0.5", "--memory", "1G", "--",
		"awk", `BEGIN { s = sprintf("%1000s", ""); while (length(s) < 67108864) s = s s; while (1) n++ }`)
	last := func(out string) map[string]float64 {
		var m struct {
			Series []struct {
				Type   string
				Pod    string
				Points []struct{ Value float64 }
			}
		}
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		got := map[string]float64{}
		for _, s := range m.Series {
			if len(s.Points) > 0 {
				got[s.Type+"/"+s.Pod] = s.Points[len(s.Points)-1].Value
			}
		}
		return got
	}
	var got map[string]float64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got = last(d.ok(t, "workload", "metrics", "burn", "-p", "team-a", "--since", "1m",
			"--type", "cpu-usage-cores", "--type", "memory-usage-bytes", "-o", "json"))
		if got["METRIC_TYPE_CPU_USAGE_CORES/0"] > 0.2 && got["METRIC_TYPE_MEMORY_USAGE_BYTES/0"] >= 64<<20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("burn's usage never showed a busy CPU and 64 MiB: %v", got)
		}
	}
	out := d.ok(t, "workload", "metrics", "burn", "-p", "team-a", "--since", "1m", "--type", "cpu-usage-cores,memory-usage-bytes")
	if !strings.Contains(out, "cpu-usage-cores") || !strings.Contains(out, "memory-usage-bytes") {
		t.Errorf("the table has no usage rows:\n%s", out)
	}
}
