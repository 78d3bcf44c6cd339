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
	// GPUHoursUsed is the allocation weighted, sample by sample, by the
	// workload's GPU utilisation then (the mean over its pods' devices).
	GPUHoursUsed   float64
	CPUCoreHours   float64
	MemoryGiBHours float64
	// Workloads counts the workloads that held anything in the window.
	Workloads int
}

// CSVHeader is the first line of every report's CSV.
var CSVHeader = []string{"segment", "node_pool", "gpu_hours_allocated", "gpu_hours_used", "cpu_core_hours", "memory_gib_hours", "workloads"}

// Compute integrates the per-workload allocation series of the history
// over the report's window, over the samples' own timestamps
// (integrate.go): the store may sample at any interval, and interval is
// only the length a series of one sample stands for. GPU-hours used weight
// each allocation sample by the workload's utilisation at that time.
func Compute(ctx context.Context, src history.Source, r *metricsv1.Report, interval time.Duration) ([]Row, error) {
	start, end := r.GetStartTime().AsTime(), r.GetEndTime().AsTime()
	if !end.After(start) || interval <= 0 {
		return nil, fmt.Errorf("report: empty window or interval")
	}
	seg := map[metricsv1.ReportSegment]string{metricsv1.ReportSegment_REPORT_SEGMENT_PROJECT: "project",
		metricsv1.ReportSegment_REPORT_SEGMENT_DEPARTMENT: "department"}[r.GetSegmentBy()]
	filter, utilFilter := "", `workload!=""`
	switch {
	case r.GetProject() != "":
		filter = fmt.Sprintf(`project=%q`, strings.TrimPrefix(r.GetProject(), "projects/"))
		utilFilter += "," + filter
	case r.GetDepartment() != "":
		// Utilisation has no department: the allocation series choose.
		filter = fmt.Sprintf(`department=%q`, strings.TrimPrefix(r.GetDepartment(), "departments/"))
	}
	sel := func(name string) string { return name + "{" + filter + "}" }
	type key struct{ seg, pool string }
	rows := map[key]*Row{}
	workloads := map[key]map[workloadKey]bool{}
	row := func(m model.Metric) (*Row, key) {
		k := key{string(m[model.LabelName(seg)]), string(m["node_pool"])}
		if seg == "" {
			k.seg = k.pool
		}
		if rows[k] == nil {
			rows[k] = &Row{Segment: k.seg, NodePool: k.pool}
		}
		return rows[k], k
	}
	for _, q := range []struct {
		name  string
		util  string // the utilisation series that weight it, if any
		scale float64
		set   func(r *Row, v, used float64)
	}{
		{"runway_workload_allocated_gpus", "runway_gpu_utilization{" + utilFilter + "}", 1,
			func(r *Row, v, used float64) { r.GPUHoursAllocated += v; r.GPUHoursUsed += used }},
		{"runway_workload_allocated_cpu_cores", "", 1, func(r *Row, v, _ float64) { r.CPUCoreHours += v }},
		{"runway_workload_allocated_memory_bytes", "", 1.0 / (1 << 30), func(r *Row, v, _ float64) { r.MemoryGiBHours += v }},
	} {
		series, err := integrate(ctx, src, sel(q.name), q.util, start, end)
		if err != nil {
			return nil, err
		}
		for _, s := range series {
			v, used := s.a.seconds(end, interval)
			r, k := row(s.m)
			q.set(r, v/3600*q.scale, used/3600*q.scale)
			if q.util != "" {
				if workloads[k] == nil {
					workloads[k] = map[workloadKey]bool{}
				}
				workloads[k][workloadOf(s.m)] = true
			}
		}
	}
	out := make([]Row, 0, len(rows))
	for k, r := range rows {
		r.Workloads = len(workloads[k])
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

// integrated is one allocation series and its integral.
type integrated struct {
	m model.Metric
	a integral
}

// integrate reads the samples of the series alloc selects over (start,
// end], piece by piece, each weighted by the utilisation util selects (none
// when empty), and integrates each series.
func integrate(ctx context.Context, src history.Source, alloc, util string, start, end time.Time) (map[model.Fingerprint]*integrated, error) {
	sels := []string{alloc}
	if util != "" {
		sels = append(sels, util)
	}
	ps, err := pieces(ctx, src, sels, start, end)
	if err != nil {
		return nil, err
	}
	u := utilisation{latest: map[workloadKey]map[model.Fingerprint]model.SamplePair{}}
	out := map[model.Fingerprint]*integrated{}
	for _, pc := range ps {
		m, err := src.Samples(ctx, alloc, pc[0], pc[1])
		if err != nil {
			return nil, err
		}
		var events map[workloadKey][]event
		if util != "" {
			um, err := src.Samples(ctx, util, pc[0], pc[1])
			if err != nil {
				return nil, err
			}
			events = u.timeline(um)
		}
		for _, s := range m {
			fp := s.Metric.Fingerprint()
			x := out[fp]
			if x == nil {
				x = &integrated{m: s.Metric}
				out[fp] = x
			}
			k := workloadOf(s.Metric)
			u.walk(&x.a, s.Values, k, events[k])
		}
		u.carry(events)
	}
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
