package metrics_test

import (
	"bytes"
	"encoding/csv"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	"github.com/runwayhq/runway/pkg/history"
	"github.com/runwayhq/runway/services/metrics"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

const interval = 15 * time.Second

// usage is a registry with the series reports read, like the scheduler's
// and the agents'.
type usage struct {
	reg            *prometheus.Registry
	gpus, cpu, mem *prometheus.GaugeVec
	util           *prometheus.GaugeVec
}

func newUsage() usage {
	wl := []string{"project", "workload", "node_pool", "department"}
	u := usage{reg: prometheus.NewRegistry(),
		gpus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "runway_workload_allocated_gpus", Help: "h"}, wl),
		cpu:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "runway_workload_allocated_cpu_cores", Help: "h"}, wl),
		mem:  prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "runway_workload_allocated_memory_bytes", Help: "h"}, wl),
		util: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "runway_gpu_utilization", Help: "h"},
			[]string{"node", "device", "project", "workload", "pod"})}
	u.reg.MustRegister(u.gpus, u.cpu, u.mem, u.util)
	return u
}

// hold is one workload holding gpus (and 4 CPU cores, 16 GiB per GPU) at a
// utilisation from start for d, in virtual time.
type hold struct {
	project, workload, department string
	gpus, util                    float64
	start, d                      time.Duration
}

// play writes the holds into a store at one gathering every interval, from
// t0 for span.
func play(t *testing.T, holds []hold, span time.Duration) *history.Store {
	t.Helper()
	return playEvery(t, holds, span, interval, nil)
}

// playEvery writes the holds into a store at one gathering every step, from
// t0 for span, but for the gatherings missed says to leave out (a scrape
// that timed out). Holds of the same workload in turn are one series whose
// value changes.
func playEvery(t *testing.T, holds []hold, span, step time.Duration, missed func(at time.Duration) bool) *history.Store {
	t.Helper()
	s, err := history.Open(history.Config{Dir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	u := newUsage()
	for at := time.Duration(0); at <= span; at += step {
		if missed != nil && missed(at) {
			continue
		}
		for _, g := range []*prometheus.GaugeVec{u.gpus, u.cpu, u.mem, u.util} {
			g.Reset()
		}
		for _, h := range holds {
			if at >= h.start && at < h.start+h.d {
				l := []string{h.project, h.workload, "default", h.department}
				u.gpus.WithLabelValues(l...).Set(h.gpus)
				u.cpu.WithLabelValues(l...).Set(4 * h.gpus)
				u.mem.WithLabelValues(l...).Set(16 * (1 << 30) * h.gpus)
				u.util.WithLabelValues("node-1", "0", h.project, h.workload, "0").Set(h.util)
			}
		}
		s.CollectOnce(t.Context(), u.reg, t0.Add(at))
	}
	return s
}

// TestReportGPUHours: a1 holds 1 GPU for 2 h at 50 % and b1 2 GPUs for
// 3 h at 100 %, in virtual time; the report's GPU-hours are the truth
// within one collection interval per workload, segmented by project,
// department and node pool, filtered by project; its CSV parses.
func TestReportGPUHours(t *testing.T) {
	holds := []hold{
		{"team-a", "a1", "dept-a", 1, 0.5, 30 * time.Minute, 2 * time.Hour},
		{"team-b", "b1", "dept-b", 2, 1, 90 * time.Minute, 3 * time.Hour},
	}
	s := play(t, holds, 5*time.Hour)
	report := func(seg metricsv1.ReportSegment, project string) *metricsv1.Report {
		return &metricsv1.Report{StartTime: timestamppb.New(t0), EndTime: timestamppb.New(t0.Add(5 * time.Hour)),
			SegmentBy: seg, Project: project}
	}
	near := func(got, want, gpus float64) bool {
		return math.Abs(got-want) <= gpus*interval.Hours()+1e-9
	}
	for _, tc := range []struct {
		seg      metricsv1.ReportSegment
		project  string
		segments []string
		alloc    []float64 // GPU-hours
		used     []float64
		gpus     []float64 // the tolerance: GPUs × one interval
	}{
		{metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT, "", []string{"team-a", "team-b"}, []float64{2, 6}, []float64{1, 6}, []float64{1, 2}},
		{metricsv1.ReportSegment_REPORT_SEGMENT_DEPARTMENT, "", []string{"dept-a", "dept-b"}, []float64{2, 6}, []float64{1, 6}, []float64{1, 2}},
		{metricsv1.ReportSegment_REPORT_SEGMENT_NODE_POOL, "", []string{"default"}, []float64{8}, []float64{7}, []float64{3}},
		{metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT, "projects/team-b", []string{"team-b"}, []float64{6}, []float64{6}, []float64{2}},
	} {
		rows, err := metrics.Compute(t.Context(), s, report(tc.seg, tc.project), interval)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != len(tc.segments) {
			t.Fatalf("%v %s: rows %+v, want %v", tc.seg, tc.project, rows, tc.segments)
		}
		for i, r := range rows {
			if r.Segment != tc.segments[i] || r.NodePool != "default" || !near(r.GPUHoursAllocated, tc.alloc[i], tc.gpus[i]) ||
				!near(r.GPUHoursUsed, tc.used[i], tc.gpus[i]) || !near(r.CPUCoreHours, 4*tc.alloc[i], 4*tc.gpus[i]) ||
				!near(r.MemoryGiBHours, 16*tc.alloc[i], 16*tc.gpus[i]) {
				t.Errorf("%v %s: row %+v, want %s %v GPU-hours allocated, %v used", tc.seg, tc.project, r, tc.segments[i], tc.alloc[i], tc.used[i])
			}
		}
		want := map[string]int{"team-a": 1, "team-b": 1, "dept-a": 1, "dept-b": 1, "default": 2}
		for _, r := range rows {
			if r.Workloads != want[r.Segment] {
				t.Errorf("%s: %d workloads, want %d", r.Segment, r.Workloads, want[r.Segment])
			}
		}
		recs, err := csv.NewReader(bytes.NewReader(metrics.CSV(rows))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(rows)+1 || len(recs[0]) != 7 || recs[0][2] != "gpu_hours_allocated" || recs[1][0] != tc.segments[0] {
			t.Errorf("CSV %v", recs)
		}
	}
}

// TestReportHoursWhateverTheInterval: the same activity sampled every 15 s,
// every 30 s (an external Prometheus's interval) and every 30 s with
// scrapes missed gives the same hours, the truth within one sampling
// interval per workload, though the service is told 15 s. GPU-hours used
// are weighted at each step: e1 holds 1 GPU for an hour at 100 %, then 3
// for an hour at 0 %, which is 1 GPU-hour used (4 GPU-hours at the mean
// utilisation would be 2).
func TestReportHoursWhateverTheInterval(t *testing.T) {
	holds := []hold{
		{"team-a", "e1", "dept-a", 1, 1, 10 * time.Minute, time.Hour},
		{"team-a", "e1", "dept-a", 3, 0, 70 * time.Minute, time.Hour},
		{"team-b", "b1", "dept-b", 2, 0.25, 40 * time.Minute, 2 * time.Hour},
	}
	const span = 3 * time.Hour
	report := &metricsv1.Report{StartTime: timestamppb.New(t0), EndTime: timestamppb.New(t0.Add(span)),
		SegmentBy: metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT}
	type want struct{ alloc, used, gpus float64 }
	truth := map[string]want{"team-a": {4, 1, 3}, "team-b": {4, 1, 2}}
	for _, h := range []struct {
		name   string
		step   time.Duration
		missed func(time.Duration) bool
		gap    time.Duration // the longest gap between two samples: the tolerance per GPU
	}{
		{"every 15 s", 15 * time.Second, nil, 15 * time.Second},
		{"every 30 s", 30 * time.Second, nil, 30 * time.Second},
		// Two scrapes in a row lost every 7 minutes: the series is there
		// all along (within PromQL's lookback), so nothing is lost but
		// where a change falls in a gap (e1's at 70 min does).
		{"every 30 s, scrapes missed", 30 * time.Second, func(at time.Duration) bool { return at%(7*time.Minute) < time.Minute && at > 0 },
			90 * time.Second},
		{"every 2 min", 2 * time.Minute, nil, 2 * time.Minute},
	} {
		rows, err := metrics.Compute(t.Context(), playEvery(t, holds, span, h.step, h.missed), report, interval)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 {
			t.Fatalf("%s: rows %+v, want team-a and team-b", h.name, rows)
		}
		t.Logf("%s: team-a %.4f/%.4f, team-b %.4f/%.4f GPU-hours allocated/used", h.name,
			rows[0].GPUHoursAllocated, rows[0].GPUHoursUsed, rows[1].GPUHoursAllocated, rows[1].GPUHoursUsed)
		for _, r := range rows {
			w := truth[r.Segment]
			tol := w.gpus*h.gap.Hours() + 1e-9
			if math.Abs(r.GPUHoursAllocated-w.alloc) > tol || math.Abs(r.GPUHoursUsed-w.used) > tol ||
				math.Abs(r.CPUCoreHours-4*w.alloc) > 4*tol || math.Abs(r.MemoryGiBHours-16*w.alloc) > 16*tol || r.Workloads != 1 {
				t.Errorf("%s: %s %+v, want %v GPU-hours allocated, %v used (within %.4f), 1 workload", h.name, r.Segment, r, w.alloc, w.used, tol)
			}
		}
	}
}

// A report whose CSV would be over the bound fails with the size, rather
// than storing what no download can carry.
func TestCSVWithin(t *testing.T) {
	rows := []metrics.Row{{Segment: "projects/a", NodePool: "default", GPUHoursAllocated: 1}, {Segment: "projects/b", NodePool: "default"}}
	whole := metrics.CSV(rows)
	if b, err := metrics.CSVWithin(rows, int64(len(whole))); err != nil || !bytes.Equal(b, whole) {
		t.Errorf("CSVWithin at its size: %q, %v; want the CSV", b, err)
	}
	_, err := metrics.CSVWithin(rows, int64(len(whole))-1)
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(len(whole))+" bytes (2 rows)") {
		t.Errorf("CSVWithin a byte short: %v, want an error with its size", err)
	}
}
