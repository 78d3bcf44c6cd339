package metrics

import (
	"context"
	"errors"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/history"
)

// MaxPoints bounds the points of one series.
const MaxPoints = 1000

// defaultWindow is the window when a request sets no start; defaultPoints
// the points when it sets no step.
const (
	defaultWindow = time.Hour
	defaultPoints = 60
)

// Deps are the service's collaborators.
type Deps struct {
	// Source is the metrics history. Required.
	Source history.Source
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Interval is the history's sampling interval, which a rate() window
	// must span several of (history.DefaultInterval when 0).
	Interval time.Duration
}

// Server is the MetricsService.
type Server struct {
	metricsv1.UnimplementedMetricsServiceServer
	src      history.Source
	now      func() time.Time
	interval time.Duration
}

// New returns the service.
func New(deps Deps) (*Server, error) {
	if deps.Source == nil {
		return nil, errors.New("metrics: Deps.Source is nil")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Interval <= 0 {
		deps.Interval = history.DefaultInterval
	}
	return &Server{src: deps.Source, now: deps.Now, interval: deps.Interval}, nil
}

// Register adds the service to a gRPC server.
func (s *Server) Register(g *grpc.Server) { metricsv1.RegisterMetricsServiceServer(g, s) }

// RegisterGateway adds the REST routes, forwarding to conn.
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return metricsv1.RegisterMetricsServiceHandler(ctx, mux, conn)
}

// windowed is what every Query request has.
type windowed interface {
	GetName() string
	GetStartTime() *timestamppb.Timestamp
	GetEndTime() *timestamppb.Timestamp
	GetStepSeconds() int64
}

// QueryWorkloadMetrics reads a workload's series.
func (s *Server) QueryWorkloadMetrics(ctx context.Context, req *metricsv1.QueryWorkloadMetricsRequest) (*metricsv1.Metrics, error) {
	project, id, ok := clusterproto.ParseWorkloadName(req.GetName())
	if !ok {
		return nil, apierr.InvalidField("name", "must be projects/{project}/workloads/{workload}")
	}
	return s.series(ctx, req, workloadQueries(project, id))
}

// QueryProjectMetrics reads a project's series.
func (s *Server) QueryProjectMetrics(ctx context.Context, req *metricsv1.QueryProjectMetricsRequest) (*metricsv1.Metrics, error) {
	id, err := idOf(req.GetName(), "projects/")
	if err != nil {
		return nil, err
	}
	return s.series(ctx, req, queueQueries("project", id))
}

// QueryDepartmentMetrics reads a department's series.
func (s *Server) QueryDepartmentMetrics(ctx context.Context, req *metricsv1.QueryDepartmentMetricsRequest) (*metricsv1.Metrics, error) {
	id, err := idOf(req.GetName(), "departments/")
	if err != nil {
		return nil, err
	}
	return s.series(ctx, req, queueQueries("department", id))
}

// QueryNodePoolMetrics reads a node pool's series.
func (s *Server) QueryNodePoolMetrics(ctx context.Context, req *metricsv1.QueryNodePoolMetricsRequest) (*metricsv1.Metrics, error) {
	id, err := idOf(req.GetName(), "nodepools/")
	if err != nil {
		return nil, err
	}
	return s.series(ctx, req, deviceQueries(`{node_pool="`+id+`"}`, true))
}

// QueryNodeMetrics reads a node's series.
func (s *Server) QueryNodeMetrics(ctx context.Context, req *metricsv1.QueryNodeMetricsRequest) (*metricsv1.Metrics, error) {
	id, err := idOf(req.GetName(), "nodes/")
	if err != nil {
		return nil, err
	}
	return s.series(ctx, req, deviceQueries(`{node="`+id+`"}`, false))
}

// QueryClusterMetrics reads the cluster's series.
func (s *Server) QueryClusterMetrics(ctx context.Context, req *metricsv1.QueryClusterMetricsRequest) (*metricsv1.Metrics, error) {
	if req.GetName() != "cluster" {
		return nil, apierr.InvalidField("name", "must be cluster")
	}
	return s.series(ctx, req, deviceQueries("", true))
}

// idOf is the id of name under prefix; node names are ids too.
func idOf(name, prefix string) (string, error) {
	id, ok := strings.CutPrefix(name, prefix)
	if !ok || !clusterproto.ValidID(id) {
		return "", apierr.InvalidField("name", "must be "+prefix+"{id}, the id of lower-case letters, digits and dashes")
	}
	return id, nil
}

// window reads a request's start, end and step, with the defaults, bounded
// at MaxPoints points.
func (s *Server) window(req windowed) (start, end time.Time, step time.Duration, err error) {
	end = s.now()
	if t := req.GetEndTime(); t != nil {
		end = t.AsTime()
	}
	start = end.Add(-defaultWindow)
	if t := req.GetStartTime(); t != nil {
		start = t.AsTime()
	}
	if !end.After(start) {
		return start, end, 0, apierr.InvalidField("end_time", "must be after start_time")
	}
	switch n := req.GetStepSeconds(); {
	case n < 0:
		return start, end, 0, apierr.InvalidField("step_seconds", "must not be negative")
	case n == 0:
		step = max(time.Second, (end.Sub(start) / defaultPoints).Truncate(time.Second))
	default:
		step = time.Duration(n) * time.Second
	}
	if end.Sub(start)/step+1 > MaxPoints {
		return start, end, 0, apierr.InvalidField("step_seconds", "gives more than 1000 points: raise it or narrow the window")
	}
	return start, end, step, nil
}

// series runs the entity's queries over the request's window.
func (s *Server) series(ctx context.Context, req windowed, qs []query) (*metricsv1.Metrics, error) {
	start, end, step, err := s.window(req)
	if err != nil {
		return nil, err
	}
	out := &metricsv1.Metrics{Name: req.GetName(), StartTime: timestamppb.New(start), EndTime: timestamppb.New(end),
		StepSeconds: int64(step / time.Second)}
	rw := model.Duration(max(2*step, 4*s.interval)).String()
	for _, q := range qs {
		m, err := s.src.Range(ctx, strings.ReplaceAll(q.promql, rateWindow, rw), start, end, step)
		if err != nil {
			return nil, sourceError(err)
		}
		sort.Slice(m, func(i, j int) bool { return m[i].Metric["pod"] < m[j].Metric["pod"] })
		for _, ss := range m {
			ms := &metricsv1.MetricSeries{Type: q.typ}
			if q.perPod {
				ms.Pod = string(ss.Metric["pod"])
			}
			for _, p := range ss.Values {
				if math.IsNaN(float64(p.Value)) {
					continue // 0/0: nothing allocated
				}
				ms.Points = append(ms.Points, &metricsv1.MetricPoint{Time: timestamppb.New(p.Timestamp.Time()), Value: float64(p.Value)})
			}
			out.Series = append(out.Series, ms)
		}
	}
	return out, nil
}

// sourceError: the history could not answer.
func sourceError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, 5*time.Second).WithCause(err)
}

// GetTelemetry reads the cluster now.
func (s *Server) GetTelemetry(ctx context.Context, req *metricsv1.GetTelemetryRequest) (*metricsv1.Telemetry, error) {
	if req.GetName() != "telemetry" {
		return nil, apierr.InvalidField("name", "must be telemetry")
	}
	now := s.now()
	read := func(q string) (model.Vector, error) {
		v, err := s.src.Instant(ctx, q, now)
		if err != nil {
			return nil, sourceError(err)
		}
		return v, nil
	}
	out := &metricsv1.Telemetry{Name: "telemetry", Time: timestamppb.New(now)}
	pools := map[string]*metricsv1.NodePoolTelemetry{}
	pool := func(name string) *metricsv1.NodePoolTelemetry {
		p, ok := pools[name]
		if !ok {
			p = &metricsv1.NodePoolTelemetry{NodePool: "nodepools/" + name}
			pools[name] = p
		}
		return p
	}
	for _, f := range []struct {
		q   string
		set func(p *metricsv1.NodePoolTelemetry, v float64)
	}{
		{`sum by (node_pool) (runway_gpu_device_allocated_gpus)`, func(p *metricsv1.NodePoolTelemetry, v float64) { p.AllocatedGpus = v }},
		{`count by (node_pool) (runway_gpu_device_allocated_gpus == 0)`, func(p *metricsv1.NodePoolTelemetry, v float64) { p.IdleGpus = v }},
		{`sum by (node_pool) (runway_nodes{ready="true"})`, func(p *metricsv1.NodePoolTelemetry, v float64) { p.ReadyNodes = int32(v) }},
		{`sum by (node_pool) (runway_nodes{ready="false"})`, func(p *metricsv1.NodePoolTelemetry, v float64) { p.UnreadyNodes = int32(v) }},
		{`count by (node_pool) (runway_workload_allocated_gpus)`, func(p *metricsv1.NodePoolTelemetry, v float64) { p.RunningWorkloads = int32(v) }},
	} {
		v, err := read(f.q)
		if err != nil {
			return nil, err
		}
		for _, smp := range v {
			f.set(pool(string(smp.Metric["node_pool"])), float64(smp.Value))
		}
	}
	for _, p := range pools {
		out.NodePools = append(out.NodePools, p)
	}
	sort.Slice(out.NodePools, func(i, j int) bool { return out.NodePools[i].NodePool < out.NodePools[j].NodePool })

	projects, err := s.projectTelemetry(read)
	if err != nil {
		return nil, err
	}
	out.Projects = projects
	return out, nil
}

// projectTelemetry is one row per project and node pool.
func (s *Server) projectTelemetry(read func(string) (model.Vector, error)) ([]*metricsv1.ProjectTelemetry, error) {
	type key struct{ project, pool string }
	rows := map[key]*metricsv1.ProjectTelemetry{}
	row := func(project, pool string) *metricsv1.ProjectTelemetry {
		k := key{project, pool}
		r, ok := rows[k]
		if !ok {
			r = &metricsv1.ProjectTelemetry{Project: "projects/" + project, NodePool: "nodepools/" + pool}
			rows[k] = r
		}
		return r
	}
	alloc, err := read(`runway_queue_allocated_gpus{kind="project"}`)
	if err != nil {
		return nil, err
	}
	for _, smp := range alloc {
		row(string(smp.Metric["queue"]), string(smp.Metric["node_pool"])).AllocatedGpus = float64(smp.Value)
	}
	quota, err := read(`runway_queue_deserved_gpus{kind="project"}`)
	if err != nil {
		return nil, err
	}
	for _, smp := range quota {
		row(string(smp.Metric["queue"]), string(smp.Metric["node_pool"])).GpuQuota = float64(smp.Value)
	}
	counts := map[string][2]int32{}
	for i, phase := range []string{"running", "pending"} {
		v, err := read(`sum by (project) (runway_workloads{phase="` + phase + `"})`)
		if err != nil {
			return nil, err
		}
		for _, smp := range v {
			c := counts[string(smp.Metric["project"])]
			c[i] = int32(smp.Value)
			counts[string(smp.Metric["project"])] = c
		}
	}
	out := make([]*metricsv1.ProjectTelemetry, 0, len(rows))
	for k, r := range rows {
		c := counts[k.project]
		r.RunningWorkloads, r.PendingWorkloads = c[0], c[1]
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Project != out[j].Project {
			return out[i].Project < out[j].Project
		}
		return out[i].NodePool < out[j].NodePool
	})
	return out, nil
}
