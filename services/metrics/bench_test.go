package metrics_test

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	"github.com/runwayhq/runway/pkg/history"
	"github.com/runwayhq/runway/services/metrics"
)

// BenchmarkReport30Days computes a 30-day consumption report over 10,000
// workloads (100 projects in 10 departments; each workload alive 3 days,
// starting over the month), from a history sampled every 10 minutes
// (about 17 million samples), segmented by project.
func BenchmarkReport30Days(b *testing.B) {
	const (
		workloads = 10_000
		step      = 10 * time.Minute
		days      = 30
	)
	s, err := history.Open(history.Config{Dir: b.TempDir(), Retention: 60 * 24 * time.Hour, QueryTimeout: 10 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	u := newUsage()
	life := 3 * 24 * time.Hour
	span := days * 24 * time.Hour
	start := func(i int) time.Duration { return (span - life) / workloads * time.Duration(i) }
	labels := func(i int) []string {
		return []string{fmt.Sprintf("project-%02d", i%100), fmt.Sprintf("w-%05d", i), "default", fmt.Sprintf("dept-%d", i%10)}
	}
	samples := 0
	next := 0 // the next workload to start; workloads start in order
	var alive []int
	for at := time.Duration(0); at <= span; at += step {
		for next < workloads && start(next) <= at {
			alive = append(alive, next)
			next++
		}
		kept := alive[:0]
		for _, i := range alive {
			l := labels(i)
			if at >= start(i)+life {
				u.gpus.DeleteLabelValues(l...)
				u.cpu.DeleteLabelValues(l...)
				u.mem.DeleteLabelValues(l...)
				u.util.DeleteLabelValues("node-1", "0", l[0], l[1], "0")
				continue
			}
			kept = append(kept, i)
			u.gpus.WithLabelValues(l...).Set(1)
			u.cpu.WithLabelValues(l...).Set(4)
			u.mem.WithLabelValues(l...).Set(16 << 30)
			u.util.WithLabelValues("node-1", "0", l[0], l[1], "0").Set(0.5)
		}
		alive = kept
		mfs, err := u.reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		n, err := s.Append(b.Context(), t0.Add(at), mfs)
		if err != nil {
			b.Fatal(err)
		}
		samples += n
	}
	r := &metricsv1.Report{StartTime: timestamppb.New(t0), EndTime: timestamppb.New(t0.Add(span)),
		SegmentBy: metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT}
	var rows []metrics.Row
	b.ResetTimer()
	for b.Loop() {
		if rows, err = metrics.Compute(b.Context(), s, r, step); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	total := 0.0
	for _, row := range rows {
		total += row.GPUHoursAllocated
	}
	// Every workload held 1 GPU for 72 hours.
	if want := float64(workloads * 72); total < want*0.99 || total > want*1.01 {
		b.Fatalf("%v GPU-hours in all, want %v", total, want)
	}
	b.ReportMetric(float64(samples), "samples")
	b.ReportMetric(float64(len(rows)), "rows")
}
