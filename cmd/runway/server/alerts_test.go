package server_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/runwayhq/runway/cmd/runway/server"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// chartRules renders the chart (bin/helm) with sets and returns the rule
// file of its alert-rules ConfigMap.
func chartRules(t *testing.T, sets ...string) string {
	t.Helper()
	helm, _ := filepath.Abs("../../../bin/helm")
	args := []string{"template", "rw", "../../../deploy/runway", "--show-only", "templates/alerts.yaml"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helm, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	var cm struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(out, &cm); err != nil || cm.Kind != "ConfigMap" {
		t.Fatalf("the alerts template: %v\n%s", err, out)
	}
	return cm.Data["runway-rules.yaml"]
}

// promRules is Prometheus's /api/v1/rules: each rule's name, health,
// last error and alerts.
type promRules struct {
	Data struct {
		Groups []struct {
			Rules []struct {
				Name, Health, LastError string
				Alerts                  []struct {
					State  string
					Labels map[string]string
				}
			}
		}
	}
}

// TestAlertRules: the chart's alerting rules, as rendered, load in a real
// Prometheus scraping runway dev; every rule evaluates without error;
// every series they name is one the platform exports; and a failed
// workload and workloads pending past the (shortened) threshold fire their
// alerts.
func TestAlertRules(t *testing.T) {
	rules := chartRules(t, "alerts.pendingFor=2s")
	if regexp.MustCompile(`\[\[ \w+ \]\]`).MatchString(rules) {
		t.Fatalf("placeholders left in the rules:\n%s", rules)
	}
	dir := t.TempDir()
	ruleFile := filepath.Join(dir, "runway-rules.yaml")
	if err := os.WriteFile(ruleFile, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan string, 1)
	d := startDev(t, filepath.Join(dir, "dev"), 1, 2, withMetrics(addrs))
	maddr := <-addrs
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	paddr := ln.Addr().String()
	ln.Close()
	prom := startPrometheusWith(t, paddr, maddr, filepath.Join(dir, "dev", server.DevMetricsTokenFile), time.Second, ruleFile)

	d.project(t, "team-a", 1)
	// A failure, a GPU training over team-a's quota (the idle series come
	// from its pods) and one that waits: 4 GPUs on a node of 2.
	for _, w := range []struct {
		id   string
		gpus int32
		cmd  []string
	}{{"crash", 0, []string{"sh", "-c", "exit 3"}}, {"busy", 2, []string{"sleep", "120"}}, {"waits", 4, []string{"sleep", "1"}}} {
		spec := &workloadv1.WorkloadSpec{Image: "busybox", Command: w.cmd}
		if w.gpus > 0 {
			spec.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: w.gpus}}
		}
		if _, err := d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: w.id,
			Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: spec}}); err != nil {
			t.Fatalf("CreateWorkload(%s): %v", w.id, err)
		}
	}

	names := slices.Compact(slices.Sorted(slices.Values(regexp.MustCompile(`\brunway_[a-z_]*[a-z]\b`).FindAllString(rules, -1))))
	if len(names) < 6 {
		t.Fatalf("the rules name %v", names)
	}
	query := func(q string) []any {
		resp, err := plainHTTP.Get(prom + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		var r struct{ Data struct{ Result []any } }
		_ = json.NewDecoder(resp.Body).Decode(&r)
		return r.Data.Result
	}
	eventually(t, "every series the rules name scraped", func() string {
		var missing []string
		for _, n := range names {
			if len(query("count("+n+")")) == 0 {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return fmt.Sprintf("not exported: %v", missing)
		}
		return ""
	})
	firing := func(alert, label, value string) func(promRules) bool {
		return func(r promRules) bool {
			for _, g := range r.Data.Groups {
				for _, rl := range g.Rules {
					for _, a := range rl.Alerts {
						if rl.Name == alert && a.State == "firing" && a.Labels[label] == value {
							return true
						}
					}
				}
			}
			return false
		}
	}
	var last promRules
	eventually(t, "RunwayWorkloadFailed and RunwayWorkloadsPendingTooLong firing for team-a, every rule healthy", func() string {
		resp, err := plainHTTP.Get(prom + "/api/v1/rules")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		last = promRules{}
		if err := json.NewDecoder(resp.Body).Decode(&last); err != nil {
			return err.Error()
		}
		n := 0
		for _, g := range last.Data.Groups {
			for _, rl := range g.Rules {
				n++
				if rl.Health == "err" {
					return fmt.Sprintf("%s: %s", rl.Name, rl.LastError)
				}
			}
		}
		if n != 10 {
			return fmt.Sprintf("%d rules loaded, want 10", n)
		}
		if !firing("RunwayWorkloadFailed", "project", "team-a")(last) || !firing("RunwayWorkloadsPendingTooLong", "project", "team-a")(last) {
			return fmt.Sprintf("rules %+v", last.Data.Groups)
		}
		return ""
	})
	// The over-quota condition holds now (its alert waits 5 minutes).
	if r := query(`runway_queue_allocated_gpus{kind="project"} > runway_queue_deserved_gpus{kind="project"}`); len(r) != 1 {
		t.Errorf("team-a over quota: %v", r)
	}
}
