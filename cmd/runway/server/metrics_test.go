package server_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/metrics"
)

// withMetrics puts the operations listener on a free loopback port and
// sends its address on the returned channel. The token dev wrote for it
// (DataDir/metrics-token) is kept for plainHTTP to send.
func withMetrics(addr chan<- string) func(*server.DevConfig) {
	return func(c *server.DevConfig) {
		dir := c.DataDir
		c.Metrics = server.MetricsConfig{Listen: "127.0.0.1:0", Ready: func(a string) {
			if b, err := os.ReadFile(filepath.Join(dir, server.DevMetricsTokenFile)); err == nil {
				opsTokens.Store(a, strings.TrimSpace(string(b)))
			}
			addr <- a
		}}
	}
}

// opsTokens are the operations listeners' bearer tokens by address.
var opsTokens sync.Map

// opsToken sends an operations listener's token to it, unless the request
// carries a token of its own.
type opsToken struct{ next http.RoundTripper }

func (o opsToken) RoundTrip(r *http.Request) (*http.Response, error) {
	if tok, ok := opsTokens.Load(r.URL.Host); ok && r.Header.Get("Authorization") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok.(string))
	}
	return o.next.RoundTrip(r)
}

// plainHTTP opens a connection per request, so no idle connection outlives
// the test (goleak).
var plainHTTP = &http.Client{Transport: opsToken{&http.Transport{DisableKeepAlives: true}}}

// TestDevMetricsToken: dev's operations listener (every tenant's series
// and PromQL over them) answers only with the token it wrote, owner-only,
// in its data directory, and keeps that token across a restart.
func TestDevMetricsToken(t *testing.T) {
	dir := t.TempDir()
	bare := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var first string
	for run := range 2 {
		t.Run(fmt.Sprint("start ", run+1), func(t *testing.T) {
			addrs := make(chan string, 1)
			startDev(t, dir, 1, 1, withMetrics(addrs))
			maddr := <-addrs
			p := filepath.Join(dir, server.DevMetricsTokenFile)
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", p, st.Mode().Perm())
			}
			b, _ := os.ReadFile(p)
			tok := strings.TrimSpace(string(b))
			if len(tok) < 40 {
				t.Fatalf("token %q: too short", tok)
			}
			if run == 0 {
				first = tok
			} else if tok != first {
				t.Error("the token changed across a restart")
			}
			for _, c := range []struct {
				path, auth string
				want       int
			}{
				{"/metrics", "", http.StatusUnauthorized},
				{"/api/v1/query?query=up", "", http.StatusUnauthorized},
				{"/metrics", "Bearer " + tok + "x", http.StatusUnauthorized},
				{"/metrics", "Bearer " + tok, http.StatusOK},
				{"/api/v1/query?query=runway_nodes", "Bearer " + tok, http.StatusOK},
			} {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+maddr+c.path, nil)
				if c.auth != "" {
					req.Header.Set("Authorization", c.auth)
				}
				resp, err := bare.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != c.want {
					t.Errorf("GET %s with a token %v: %d, want %d", c.path, c.auth != "", resp.StatusCode, c.want)
				}
			}
		})
	}
}

// scrape reads GET /metrics at addr and parses it.
func scrape(t *testing.T, addr string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := plainHTTP.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return string(b), mfs
}

// value is the value of the series of family name whose labels include
// want ("k=v" pairs); NaN when there is none, and the test fails when more
// than one matches.
func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want ...string) float64 {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		return math.NaN()
	}
	out, n := math.NaN(), 0
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		ok := true
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			ok = ok && labels[k] == v
		}
		if !ok {
			continue
		}
		n++
		switch {
		case m.GetGauge() != nil:
			out = m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			out = m.GetCounter().GetValue()
		case m.GetHistogram() != nil:
			out = float64(m.GetHistogram().GetSampleCount())
		}
	}
	if n > 1 {
		t.Fatalf("%s%v: %d series match", name, want, n)
	}
	return out
}

// TestDevMetricsAfterQuickStart plays the README's quick start (team-a and
// team-b deserve 2 GPUs each on 2 nodes × 2 GPUs; a1 1, a2 2, b1 1, then b2
// 1 reclaims a1) and reads the operations listener: every family the
// services export is there with the values the quick start implies, and
// promlint finds nothing wrong with any of them.
func TestDevMetricsAfterQuickStart(t *testing.T) {
	addrs := make(chan string, 1)
	d := startDev(t, t.TempDir(), 2, 2, withMetrics(addrs))
	maddr := <-addrs
	if maddr == d.addr {
		t.Fatal("metrics served on the API listener")
	}
	quickStart(t, d)
	// A department's policy: the workload service asks the quota service
	// for the department's projects, its one call to another service (it
	// reads projects where the quota service stores them), so that
	// grpc_client_* has series.
	maxCPU := float64(64000)
	if _, err := d.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{AllowMissing: true, Policy: &workloadv1.Policy{
		Name: "departments/default/policies/training", Rules: map[string]*workloadv1.FieldRule{"milliCpu": {Max: &maxCPU}}}}); err != nil {
		t.Fatal(err)
	}

	// A sign-in that fails and one that works.
	if _, err := d.identity.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "alice",
		User: &identityv1.User{Email: "alice@example.com", Password: "alice's first password"}}); err != nil {
		t.Fatal(err)
	}
	for _, pw := range []string{"wrong", "alice's first password"} {
		_, err := d.identity.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
			Password: &identityv1.PasswordCredentials{User: "alice", Password: pw, NewPassword: "alice's second password"}}})
		if (err == nil) != (pw != "wrong") {
			t.Fatalf("login with %q: %v", pw, err)
		}
	}

	want := []struct {
		name   string
		labels []string
		value  float64
	}{
		{"runway_queue_deserved_gpus", []string{"queue=team-a", "node_pool=default", "kind=project", "department=default"}, 2},
		{"runway_queue_fair_share_gpus", []string{"queue=team-a", "node_pool=default"}, 2},
		{"runway_queue_allocated_gpus", []string{"queue=team-a", "node_pool=default"}, 2},
		{"runway_queue_allocated_gpus", []string{"queue=team-b", "node_pool=default"}, 2},
		{"runway_queue_requested_gpus", []string{"queue=team-a", "node_pool=default"}, 3},
		{"runway_queue_limit_gpus", []string{"queue=team-a", "node_pool=default"}, math.Inf(1)},
		{"runway_queue_allocated_gpus", []string{"queue=default", "kind=department"}, 4},
		{"runway_scheduler_pending_workloads", []string{"queue=team-a", "node_pool=default", "check=reclaim"}, 1},
		{"runway_scheduler_evictions_total", []string{"rule=reclaim"}, 1},
		{"runway_scheduler_evictions_total", []string{"rule=preempt"}, 0},
		{"runway_scheduler_bindings_total", []string{"rule=reclaim"}, 1},
		{"runway_scheduler_bindings_total", []string{"rule=allocate"}, 3},
		{"runway_scheduler_plan_conflicts_total", nil, 0},
		{"runway_scheduler_leader", nil, 1},
		{"runway_workloads", []string{"project=team-a", "phase=running", "type=training"}, 1},
		{"runway_workloads", []string{"project=team-a", "phase=pending", "type=training"}, 1},
		{"runway_workloads", []string{"project=team-b", "phase=running", "type=training"}, 2},
		{"runway_workload_allocated_gpus", []string{"project=team-a", "workload=a2"}, 2},
		{"runway_workload_allocated_gpus", []string{"project=team-b", "workload=b2"}, 1},
		{"runway_nodes", []string{"node_pool=default", "ready=true"}, 2},
		{"runway_nodes", []string{"node_pool=default", "ready=false"}, 0},
		{"runway_gpu_devices", []string{"node_pool=default", "state=whole"}, 4},
		{"runway_gpu_devices", []string{"node_pool=default", "state=free"}, 0},
		{"runway_gpu_devices", []string{"node_pool=default", "state=unhealthy"}, 0},
		{"runway_sign_ins_total", []string{"method=password", "outcome=success"}, 1},
		{"runway_sign_ins_total", []string{"method=password", "outcome=unauthenticated"}, 1},
		{"runway_audit_events_dropped_total", nil, 0},
		{"grpc_server_handled_total", []string{"grpc_method=CreateWorkload", "grpc_code=OK"}, 4},
	}
	var text string
	eventually(t, "the quick start's series", func() string {
		var mfs map[string]*dto.MetricFamily
		text, mfs = scrape(t, maddr)
		for _, w := range want {
			if got := value(t, mfs, w.name, w.labels...); got != w.value {
				return fmt.Sprintf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
			}
		}
		if _, ok := mfs["runway_workload_allocated_gpus"]; ok && !math.IsNaN(value(t, mfs, "runway_workload_allocated_gpus", "workload=a1")) {
			return "a1 (pending) still has an allocation series"
		}
		for _, f := range []string{"runway_scheduler_cycle_duration_seconds", "runway_scheduler_plan_apply_duration_seconds",
			"grpc_client_handled_total", "grpc_server_handling_seconds", "go_goroutines", "process_cpu_seconds_total",
			"runway_gpu_utilization", "runway_gpu_device_allocated_gpus", "runway_queue_deserved_cpu_cores",
			"runway_queue_limit_memory_bytes", "runway_workload_allocated_cpu_cores", "runway_workload_allocated_memory_bytes"} {
			if mfs[f] == nil {
				return "no family " + f
			}
		}
		if n := value(t, mfs, "runway_scheduler_cycle_duration_seconds", "action=apply"); !(n >= 2) {
			return fmt.Sprintf("%v applied plans observed", n)
		}
		// Five submissions and alice's creation are audited.
		if n := value(t, mfs, "runway_audit_events_written_total"); !(n >= 6) {
			return fmt.Sprintf("%v audit events written", n)
		}
		return ""
	})
	var sum float64
	_, mfs := scrape(t, maddr)
	for _, m := range mfs["runway_gpu_device_allocated_gpus"].GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	if sum != 4 {
		t.Errorf("devices hold %v GPUs in all, want 4", sum)
	}
	problems, err := metricsLint(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// metricsLint runs promlint on an exposition, as `promtool check metrics`.
func metricsLint(text string) ([]metrics.Problem, error) {
	return metrics.LintText(strings.NewReader(text))
}

// quickStart creates team-a and team-b (2 GPUs each), submits a1 (1), a2
// (2) and b1 (1), waits until they run, then b2 (1), and waits until b2
// runs and a1 is back to pending. between, when set, runs before b2 is
// submitted.
func quickStart(t *testing.T, d *dev, between ...func()) {
	t.Helper()
	d.project(t, "team-a", 2)
	d.project(t, "team-b", 2)
	d.training(t, "team-a", "a1", 1)
	d.training(t, "team-a", "a2", 2)
	d.training(t, "team-b", "b1", 1)
	eventually(t, "a1, a2 and b1 running", func() string {
		ph := d.phases(t, "team-a/a1", "team-a/a2", "team-b/b1")
		for _, n := range []string{"team-a/a1", "team-a/a2", "team-b/b1"} {
			if ph[n] != running {
				return fmt.Sprintf("phases %v", ph)
			}
		}
		return ""
	})
	for _, f := range between {
		f()
	}
	d.training(t, "team-b", "b2", 1)
	eventually(t, "b2 running, a1 reclaimed", func() string {
		ph := d.phases(t, "team-a/a1", "team-b/b2")
		if ph["team-b/b2"] != running || ph["team-a/a1"] == running {
			return fmt.Sprintf("phases %v", ph)
		}
		return ""
	})
}
