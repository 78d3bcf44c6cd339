package server_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runwayhq/runway/cmd/runway/server"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/history"
	metricssvc "github.com/runwayhq/runway/services/metrics"
)

// startPrometheus runs bin/prometheus (cmd/prometheus of the module go.mod
// pins, built by make/testbin.mk) on 127.0.0.1, scraping target's /metrics
// every interval with the bearer token in tokenFile (none when empty), and
// returns its URL once it is ready.
func startPrometheus(t *testing.T, target, tokenFile string, interval time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return startPrometheusAt(t, addr, target, tokenFile, interval)
}

// startPrometheusAt is startPrometheus listening on addr.
func startPrometheusAt(t *testing.T, addr, target, tokenFile string, interval time.Duration) string {
	t.Helper()
	return startPrometheusWith(t, addr, target, tokenFile, interval, "")
}

// startPrometheusWith is startPrometheusAt evaluating the rule file rules
// (none when empty) at every interval.
func startPrometheusWith(t *testing.T, addr, target, tokenFile string, interval time.Duration, rules string) string {
	t.Helper()
	bin, _ := filepath.Abs("../../../bin/prometheus")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (make bin/prometheus builds it)", bin, err)
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
  - job_name: runway
    static_configs:
      - targets: [%[2]q]
`, model.Duration(interval), target)
	if rules != "" {
		cfg = fmt.Sprintf("rule_files: [%q]\n", rules) + strings.Replace(cfg, "global:\n", "global:\n  evaluation_interval: "+model.Duration(interval).String()+"\n", 1)
	}
	if tokenFile != "" {
		cfg += "    authorization:\n      credentials_file: " + tokenFile + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", log.String())
		}
	})
	url := "http://" + addr
	eventually(t, "prometheus ready", func() string {
		resp, err := plainHTTP.Get(url + "/-/ready")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp.Status
		}
		return ""
	})
	return url
}

// TestMetricsAgainstPrometheus: a real Prometheus scrapes runway dev's
// operations listener while the quick start plays; then the MetricsService
// of dev (its embedded history) and one reading that Prometheus
// (--prometheus-url) answer every entity's series and the telemetry alike,
// and the runway_ families hold the same label sets in both stores.
func TestMetricsAgainstPrometheus(t *testing.T) {
	const devInterval, promInterval = 200 * time.Millisecond, time.Second
	dir := t.TempDir()
	addrs := make(chan string, 1)
	d := startDev(t, dir, 2, 2, withMetrics(addrs), func(c *server.DevConfig) {
		c.History = server.HistoryConfig{Interval: devInterval}
	})
	maddr := <-addrs
	promURL := startPrometheus(t, maddr, filepath.Join(dir, server.DevMetricsTokenFile), promInterval)
	remote, err := history.NewRemote(promURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	viaProm, err := metricssvc.New(metricssvc.Deps{Source: remote, Interval: promInterval})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(d.token)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	embedded := metricsv1.NewMetricsServiceClient(conn)

	// Prometheus applies its targets a few seconds after it starts.
	eventually(t, "Prometheus scraping runway dev", func() string {
		v, err := remote.Instant(t.Context(), `up{job="runway"} == 1`, time.Now())
		if err != nil || len(v) != 1 {
			return fmt.Sprintf("up: %v %v", v, err)
		}
		return ""
	})
	quickStart(t, d)
	ctx := t.Context()
	embeddedStore, err := history.NewRemote("http://"+maddr, opsToken{http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	// A window of the settled state that both stores have sampled. On a
	// loaded machine a scrape of Prometheus's can time out, which marks
	// every series stale: such a window is not a difference of the stores,
	// and another is taken.
	for attempt := 1; ; attempt++ {
		// Past the longest rate() window (4 of Prometheus's intervals)
		// after the quick start's last change.
		time.Sleep(6 * promInterval)
		from := time.Now().Truncate(time.Second)
		time.Sleep(4 * time.Second)
		to := time.Now().Truncate(time.Second)
		time.Sleep(2 * promInterval)
		up, err := remote.Instant(ctx, fmt.Sprintf(`min_over_time(up{job="runway"}[%s])`, model.Duration(time.Since(from)+3*time.Second)), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(up) != 1 || up[0].Value != 1 {
			if attempt == 5 {
				t.Fatalf("Prometheus missed a scrape of runway dev in each of 5 windows: up %v", up)
			}
			t.Logf("window %d: Prometheus missed a scrape (up %v); another window", attempt, up)
			continue
		}
		for _, p := range compareStores(ctx, t, embedded, viaProm, embeddedStore, remote, from, to, devInterval, promInterval) {
			t.Error(p)
		}
		return
	}
}

// compareStores reads every entity's series over [from, to], the
// telemetry of now and the runway_ series at to, from dev's MetricsService
// (the embedded history) and from one reading Prometheus, and says where
// they differ.
func compareStores(ctx context.Context, t *testing.T, embedded metricsv1.MetricsServiceClient, viaProm *metricssvc.Server,
	embeddedStore, remote history.Source, from, to time.Time, devInterval, promInterval time.Duration) []string {
	s, e := timestamppb.New(from), timestamppb.New(to)
	type query struct {
		what     string
		embedded func() (*metricsv1.Metrics, error)
		real     func() (*metricsv1.Metrics, error)
	}
	workload := &metricsv1.QueryWorkloadMetricsRequest{Name: "projects/team-a/workloads/a2", StartTime: s, EndTime: e, StepSeconds: 1}
	project := &metricsv1.QueryProjectMetricsRequest{Name: "projects/team-b", StartTime: s, EndTime: e, StepSeconds: 1}
	dept := &metricsv1.QueryDepartmentMetricsRequest{Name: "departments/default", StartTime: s, EndTime: e, StepSeconds: 1}
	pool := &metricsv1.QueryNodePoolMetricsRequest{Name: "nodepools/default", StartTime: s, EndTime: e, StepSeconds: 1}
	node := &metricsv1.QueryNodeMetricsRequest{Name: "nodes/node-1", StartTime: s, EndTime: e, StepSeconds: 1}
	cluster := &metricsv1.QueryClusterMetricsRequest{Name: "cluster", StartTime: s, EndTime: e, StepSeconds: 1}
	var problems []string
	for _, q := range []query{
		{"workload a2", func() (*metricsv1.Metrics, error) { return embedded.QueryWorkloadMetrics(ctx, workload) },
			func() (*metricsv1.Metrics, error) { return viaProm.QueryWorkloadMetrics(ctx, workload) }},
		{"project team-b", func() (*metricsv1.Metrics, error) { return embedded.QueryProjectMetrics(ctx, project) },
			func() (*metricsv1.Metrics, error) { return viaProm.QueryProjectMetrics(ctx, project) }},
		{"department default", func() (*metricsv1.Metrics, error) { return embedded.QueryDepartmentMetrics(ctx, dept) },
			func() (*metricsv1.Metrics, error) { return viaProm.QueryDepartmentMetrics(ctx, dept) }},
		{"node pool default", func() (*metricsv1.Metrics, error) { return embedded.QueryNodePoolMetrics(ctx, pool) },
			func() (*metricsv1.Metrics, error) { return viaProm.QueryNodePoolMetrics(ctx, pool) }},
		{"node node-1", func() (*metricsv1.Metrics, error) { return embedded.QueryNodeMetrics(ctx, node) },
			func() (*metricsv1.Metrics, error) { return viaProm.QueryNodeMetrics(ctx, node) }},
		{"cluster", func() (*metricsv1.Metrics, error) { return embedded.QueryClusterMetrics(ctx, cluster) },
			func() (*metricsv1.Metrics, error) { return viaProm.QueryClusterMetrics(ctx, cluster) }},
	} {
		em, err := q.embedded()
		if err != nil {
			t.Fatalf("%s, embedded: %v", q.what, err)
		}
		rm, err := q.real()
		if err != nil {
			t.Fatalf("%s, Prometheus: %v", q.what, err)
		}
		if msg := sameSeries(em, rm); msg != "" {
			problems = append(problems, q.what+": "+msg)
		}
	}

	// The telemetry of now, once Prometheus has scraped the settled state.
	et, err := embedded.GetTelemetry(ctx, &metricsv1.GetTelemetryRequest{Name: "telemetry"})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := viaProm.GetTelemetry(ctx, &metricsv1.GetTelemetryRequest{Name: "telemetry"})
	if err != nil {
		t.Fatal(err)
	}
	et.Time, rt.Time = nil, nil
	if !proto.Equal(et, rt) {
		problems = append(problems, fmt.Sprintf("telemetry:\nembedded   %v\nPrometheus %v", et, rt))
	}

	// A consumption report of the window from each store, both told the
	// embedded history's interval: the hours are integrated over each
	// store's own samples, so they agree within one of Prometheus's
	// intervals per GPU (each project holds 2 GPUs throughout).
	report := &metricsv1.Report{StartTime: s, EndTime: e, SegmentBy: metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT}
	er, err := metricssvc.Compute(ctx, embeddedStore, report, devInterval)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := metricssvc.Compute(ctx, remote, report, devInterval)
	if err != nil {
		t.Fatal(err)
	}
	tol := 2 * promInterval.Hours()
	truth := 2 * to.Sub(from).Hours()
	if len(er) != 2 || len(rr) != 2 {
		problems = append(problems, fmt.Sprintf("report rows: embedded %+v, Prometheus %+v; want team-a and team-b", er, rr))
	} else {
		for i := range er {
			a, b := er[i], rr[i]
			if a.Segment != b.Segment || math.Abs(a.GPUHoursAllocated-b.GPUHoursAllocated) > tol ||
				math.Abs(a.GPUHoursAllocated-truth) > tol || math.Abs(a.GPUHoursUsed-b.GPUHoursUsed) > tol ||
				math.Abs(a.CPUCoreHours-b.CPUCoreHours) > 100*tol || math.Abs(a.MemoryGiBHours-b.MemoryGiBHours) > 1000*tol {
				problems = append(problems, fmt.Sprintf("report of %s (%.6f GPU-hours held): embedded %+v, Prometheus %+v", a.Segment, truth, a, b))
			}
		}
	}

	// Every runway_ series, by its labels (Prometheus adds job and
	// instance, the target's).
	labelSets := func(src history.Source) []string {
		v, err := src.Instant(ctx, `{__name__=~"runway_.+"}`, to)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range v {
			delete(s.Metric, "job")
			delete(s.Metric, "instance")
			out = append(out, s.Metric.String())
		}
		sort.Strings(out)
		return out
	}
	el, rl := labelSets(embeddedStore), labelSets(remote)
	if len(el) < 50 || !slices.Equal(el, rl) {
		problems = append(problems, fmt.Sprintf("runway_ series: %d embedded, %d in Prometheus; only embedded %q; only in Prometheus %q",
			len(el), len(rl), minus(el, rl), minus(rl, el)))
	}
	return problems
}

// sameSeries compares two answers of the MetricsService: the same series
// (type and pod), at the same times, with values within a few percent (a
// rate over samples taken at other instants differs a little).
func sameSeries(a, b *metricsv1.Metrics) string {
	key := func(s *metricsv1.MetricSeries) string { return s.GetType().String() + "/" + s.GetPod() }
	index := func(m *metricsv1.Metrics) map[string]*metricsv1.MetricSeries {
		out := map[string]*metricsv1.MetricSeries{}
		for _, s := range m.GetSeries() {
			out[key(s)] = s
		}
		return out
	}
	ai, bi := index(a), index(b)
	var ak, bk []string
	for k := range ai {
		ak = append(ak, k)
	}
	for k := range bi {
		bk = append(bk, k)
	}
	sort.Strings(ak)
	sort.Strings(bk)
	if !slices.Equal(ak, bk) || len(ak) == 0 {
		return fmt.Sprintf("series embedded %v, Prometheus %v", ak, bk)
	}
	for _, k := range ak {
		ap, bp := ai[k].GetPoints(), bi[k].GetPoints()
		if len(ap) != len(bp) || len(ap) == 0 {
			return fmt.Sprintf("%s: %d points embedded, %d in Prometheus (%s; %s)", k, len(ap), len(bp), pointList(ap), pointList(bp))
		}
		for i := range ap {
			x, y := ap[i].GetValue(), bp[i].GetValue()
			if !ap[i].GetTime().AsTime().Equal(bp[i].GetTime().AsTime()) || math.Abs(x-y) > 0.02+0.05*math.Abs(y) {
				return fmt.Sprintf("%s at %v: embedded %v, Prometheus %v at %v", k, ap[i].GetTime().AsTime(), x, y, bp[i].GetTime().AsTime())
			}
		}
	}
	return ""
}

func pointList(ps []*metricsv1.MetricPoint) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s=%g", p.GetTime().AsTime().Format("15:04:05"), p.GetValue()))
	}
	return strings.Join(out, " ")
}

// minus is what a holds that b does not (both sorted).
func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, ok := slices.BinarySearch(b, s); !ok {
			out = append(out, s)
		}
	}
	return out
}
