package metrics

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	"github.com/runwayhq/runway/pkg/history"
)

// Row is one line of a consumption report.
type Row struct {
	Segment, NodePool string
	GPUHoursAllocated float64
	// GPUHoursUsed is the allocation weighted by the pods' GPU utilisation
	// (each workload's mean over the window).
	GPUHoursUsed   float64
	CPUCoreHours   float64
	MemoryGiBHours float64
	// Workloads counts the workloads that held anything in the window.
	Workloads int
}

// CSVHeader is the first line of every report's CSV.
var CSVHeader = []string{"segment", "node_pool", "gpu_hours_allocated", "gpu_hours_used", "cpu_core_hours", "memory_gib_hours", "workloads"}

// Compute integrates the per-workload allocation series of the history
// over the report's window: each sample stands for one collection interval
// (the history's sampling), so a workload's hours are its samples times the
// interval, within one interval of the truth.
func Compute(ctx context.Context, src history.Source, r *metricsv1.Report, interval time.Duration) ([]Row, error) {
	start, end := r.GetStartTime().AsTime(), r.GetEndTime().AsTime()
	if !end.After(start) || interval <= 0 {
		return nil, fmt.Errorf("report: empty window or interval")
	}
	seg := map[metricsv1.ReportSegment]string{metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT: "project",
		metricsv1.ReportSegment_REPORT_SEGMENT_DEPARTMENT: "department"}[r.GetSegmentBy()]
	by := "node_pool"
	if seg != "" {
		by = seg + ", node_pool"
	}
	filter := ""
	switch {
	case r.GetProject() != "":
		filter = fmt.Sprintf(`project=%q`, strings.TrimPrefix(r.GetProject(), "projects/"))
	case r.GetDepartment() != "":
		filter = fmt.Sprintf(`department=%q`, strings.TrimPrefix(r.GetDepartment(), "departments/"))
	}
	w := model.Duration(end.Sub(start)).String()
	hours := interval.Hours()
	sel := func(name string) string { return name + "{" + filter + "}" }
	queries := []struct {
		q     string
		scale float64
		set   func(*Row, float64)
	}{
		{fmt.Sprintf(`sum by (%s) (sum_over_time(%s[%s]))`, by, sel("runway_workload_allocated_gpus"), w), hours,
			func(r *Row, v float64) { r.GPUHoursAllocated = v }},
		// A workload's GPU-hours times its pods' mean utilisation over the
		// window (no subquery: a 30-day one over every workload is too slow).
		{fmt.Sprintf(`sum by (%s) (sum_over_time(%s[%s]) * on (project, workload) group_left () `+
			`avg by (project, workload) (avg_over_time(runway_gpu_utilization{workload!=""}[%s])))`,
			by, sel("runway_workload_allocated_gpus"), w, w), hours,
			func(r *Row, v float64) { r.GPUHoursUsed = v }},
		{fmt.Sprintf(`sum by (%s) (sum_over_time(%s[%s]))`, by, sel("runway_workload_allocated_cpu_cores"), w), hours,
			func(r *Row, v float64) { r.CPUCoreHours = v }},
		{fmt.Sprintf(`sum by (%s) (sum_over_time(%s[%s]))`, by, sel("runway_workload_allocated_memory_bytes"), w), hours / (1 << 30),
			func(r *Row, v float64) { r.MemoryGiBHours = v }},
		{fmt.Sprintf(`count by (%s) (count_over_time(%s[%s]))`, by, sel("runway_workload_allocated_gpus"), w), 1,
			func(r *Row, v float64) { r.Workloads = int(v) }},
	}
	type key struct{ seg, pool string }
	rows := map[key]*Row{}
	for _, q := range queries {
		v, err := src.Instant(ctx, q.q, end)
		if err != nil {
			return nil, err
		}
		for _, s := range v {
			k := key{string(s.Metric[model.LabelName(seg)]), string(s.Metric["node_pool"])}
			if seg == "" {
				k.seg = k.pool
			}
			row, ok := rows[k]
			if !ok {
				row = &Row{Segment: k.seg, NodePool: k.pool}
				rows[k] = row
			}
			q.set(row, float64(s.Value)*q.scale)
		}
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Segment != out[j].Segment {
			return out[i].Segment < out[j].Segment
		}
		return out[i].NodePool < out[j].NodePool
	})
	return out, nil
}

// CSVWithin is CSV(rows), or an error saying so when it is over max bytes.
func CSVWithin(rows []Row, max int64) ([]byte, error) {
	b := CSV(rows)
	if int64(len(b)) > max {
		return nil, fmt.Errorf("the report's CSV would be %d bytes (%d rows), more than the %d one download carries: report on a shorter window or a coarser segment",
			len(b), len(rows), max)
	}
	return b, nil
}

// CSV writes rows under CSVHeader.
func CSV(rows []Row) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(CSVHeader)
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, r := range rows {
		_ = w.Write([]string{r.Segment, r.NodePool, f(r.GPUHoursAllocated), f(r.GPUHoursUsed), f(r.CPUCoreHours),
			f(r.MemoryGiBHours), strconv.Itoa(r.Workloads)})
	}
	w.Flush()
	return b.Bytes()
}
