package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

func topCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "top", Short: "What the cluster holds now: nodes, projects or node pools (from the metrics history)"}
	cmd.AddCommand(topNodesCommand(), topProjectsCommand(), topNodePoolsCommand())
	return cmd
}

// telemetryCommand is a `runway top` subcommand printing a part of the
// telemetry.
func telemetryCommand(use, short string, print func(w io.Writer, output string, t *metricsv1.Telemetry) error) *cobra.Command {
	var output string
	var watch bool
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Example: "  runway top " + use + "\n  runway top " + use + " -o json --watch",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				t, err := c.MetricsService.GetTelemetry(ctx, &metricsv1.GetTelemetryRequest{Name: "telemetry"})
				if err != nil {
					return err
				}
				return print(w, output, t)
			})
		},
	}
	outputFlag(cmd, &output)
	watchFlag(cmd, &watch)
	return cmd
}

func topProjectsCommand() *cobra.Command {
	return telemetryCommand("projects", "Projects now: allocated GPUs against quota, running and pending workloads",
		func(w io.Writer, output string, t *metricsv1.Telemetry) error {
			if output != formatTable {
				return printMessages(w, output, true, t.GetProjects()...)
			}
			tb := newTable(w, "Project", "Node Pool", "GPU Alloc.", "GPU Quota", "Running", "Pending")
			for _, p := range t.GetProjects() {
				tb.row(sdk.ID(p.GetProject()), sdk.ID(p.GetNodePool()), number(p.GetAllocatedGpus()), number(p.GetGpuQuota()),
					strconv.Itoa(int(p.GetRunningWorkloads())), strconv.Itoa(int(p.GetPendingWorkloads())))
			}
			return tb.flush()
		})
}

func topNodePoolsCommand() *cobra.Command {
	return telemetryCommand("node-pools", "Node pools now: allocated and idle GPUs, ready nodes, running workloads",
		func(w io.Writer, output string, t *metricsv1.Telemetry) error {
			if output != formatTable {
				return printMessages(w, output, true, t.GetNodePools()...)
			}
			tb := newTable(w, "Node Pool", "GPU Alloc.", "GPU Idle", "Ready", "Not Ready", "Running")
			for _, p := range t.GetNodePools() {
				tb.row(sdk.ID(p.GetNodePool()), number(p.GetAllocatedGpus()), number(p.GetIdleGpus()),
					strconv.Itoa(int(p.GetReadyNodes())), strconv.Itoa(int(p.GetUnreadyNodes())), strconv.Itoa(int(p.GetRunningWorkloads())))
			}
			return tb.flush()
		})
}

// maxTopNodes bounds the nodes `runway top nodes` reads series of.
const maxTopNodes = 200

func topNodesCommand() *cobra.Command {
	var output string
	var watch bool
	cmd := &cobra.Command{
		Use:     "nodes",
		Short:   "Nodes now: GPUs allocated, used and total, utilisation (the last 5 minutes' latest point)",
		Example: "  runway top nodes\n  runway top nodes -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				ns, err := sdk.Collect(c.Nodes(ctx, ""))
				if err != nil {
					return err
				}
				if len(ns) > maxTopNodes {
					ns = ns[:maxTopNodes]
				}
				now := time.Now()
				var ms []*metricsv1.Metrics
				for _, n := range ns {
					m, err := c.MetricsService.QueryNodeMetrics(ctx, &metricsv1.QueryNodeMetricsRequest{Name: n.GetName(),
						StartTime: timestamppb.New(now.Add(-5 * time.Minute)), EndTime: timestamppb.New(now), StepSeconds: 15})
					if err != nil {
						return err
					}
					ms = append(ms, m)
				}
				if output != formatTable {
					return printMessages(w, output, true, ms...)
				}
				tb := newTable(w, "Node", "GPU Alloc.", "GPU Used", "GPUs", "GPU Util.")
				for _, m := range ms {
					tb.row(sdk.ID(m.GetName()), lastValue(m, metricsv1.MetricType_METRIC_TYPE_ALLOCATED_GPUS),
						lastValue(m, metricsv1.MetricType_METRIC_TYPE_USED_GPUS), lastValue(m, metricsv1.MetricType_METRIC_TYPE_TOTAL_GPUS),
						percent(m, metricsv1.MetricType_METRIC_TYPE_GPU_UTILIZATION))
				}
				return tb.flush()
			})
		},
	}
	outputFlag(cmd, &output)
	watchFlag(cmd, &watch)
	return cmd
}

// number prints a quantity with two decimals; "unlimited" for +Inf.
func number(v float64) string {
	if math.IsInf(v, 1) {
		return "unlimited"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func lastPoint(s *metricsv1.MetricSeries) (float64, bool) {
	if p := s.GetPoints(); len(p) > 0 {
		return p[len(p)-1].GetValue(), true
	}
	return 0, false
}

func lastValue(m *metricsv1.Metrics, typ metricsv1.MetricType) string {
	for _, s := range m.GetSeries() {
		if v, ok := lastPoint(s); ok && s.GetType() == typ {
			return number(v)
		}
	}
	return "-"
}

func percent(m *metricsv1.Metrics, typ metricsv1.MetricType) string {
	for _, s := range m.GetSeries() {
		if v, ok := lastPoint(s); ok && s.GetType() == typ {
			return strconv.FormatFloat(100*v, 'f', 0, 64) + "%"
		}
	}
	return "-"
}

// sparkLevels are the sparkline's marks, lowest to highest (ASCII only).
const sparkLevels = "_.-~=+*#"

// sparkline draws values scaled between their minimum and maximum, at most
// width marks (the last points).
func sparkline(vs []float64, width int) string {
	if len(vs) > width {
		vs = vs[len(vs)-width:]
	}
	if len(vs) == 0 {
		return ""
	}
	lo, hi := slices.Min(vs), slices.Max(vs)
	var b strings.Builder
	for _, v := range vs {
		i := 0
		if hi > lo && !math.IsInf(hi, 0) {
			i = int((v - lo) / (hi - lo) * float64(len(sparkLevels)-1))
		}
		b.WriteByte(sparkLevels[i])
	}
	return b.String()
}

// metricTypeName is a metric type as the CLI names it: "gpu-utilization".
func metricTypeName(t metricsv1.MetricType) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(t.String(), "METRIC_TYPE_")), "_", "-")
}

func workloadMetricsCommand() *cobra.Command {
	var (
		project, output string
		since           time.Duration
		types           []string
	)
	cmd := &cobra.Command{
		Use:   "metrics NAME",
		Short: "A workload's metrics over time: GPU utilisation and memory per pod, allocation (a table with a sparkline)",
		Example: "  runway workload metrics a1 -p team-a\n  runway workload metrics a1 -p team-a --since 6h --type gpu-utilization\n" +
			"  runway workload metrics a1 -p team-a -o json",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needProject(project); err != nil {
				return err
			}
			if err := checkFormat(output); err != nil {
				return err
			}
			want := map[string]bool{}
			for _, t := range types {
				if _, ok := metricsv1.MetricType_value["METRIC_TYPE_"+strings.ToUpper(strings.ReplaceAll(t, "-", "_"))]; !ok || t == "unspecified" {
					return usageError("unknown --type %q (want gpu-utilization, gpu-memory-used-bytes, cpu-usage-cores, memory-usage-bytes, allocated-gpus, allocated-cpu-cores or allocated-memory-bytes)", t)
				}
				want[t] = true
			}
			if since <= 0 {
				return usageError("--since must be positive")
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				now := time.Now()
				m, err := c.MetricsService.QueryWorkloadMetrics(ctx, &metricsv1.QueryWorkloadMetricsRequest{
					Name: "projects/" + project + "/workloads/" + args[0], StartTime: timestamppb.New(now.Add(-since)), EndTime: timestamppb.New(now)})
				if err != nil {
					return err
				}
				if len(want) > 0 {
					m.Series = slices.DeleteFunc(m.Series, func(s *metricsv1.MetricSeries) bool { return !want[metricTypeName(s.GetType())] })
				}
				if output != formatTable {
					return printMessages(cmd.OutOrStdout(), output, false, m)
				}
				tb := newTable(cmd.OutOrStdout(), "Metric", "Pod", "Last", "Min", "Max", "Over the last "+since.String())
				for _, s := range m.GetSeries() {
					vs := make([]float64, 0, len(s.GetPoints()))
					for _, p := range s.GetPoints() {
						vs = append(vs, p.GetValue())
					}
					pod := s.GetPod()
					if pod == "" {
						pod = "-"
					}
					if len(vs) == 0 {
						tb.row(metricTypeName(s.GetType()), pod, "-", "-", "-", "")
						continue
					}
					tb.row(metricTypeName(s.GetType()), pod, number(vs[len(vs)-1]), number(slices.Min(vs)), number(slices.Max(vs)), sparkline(vs, 60))
				}
				return tb.flush()
			})
		},
	}
	projectFlag(cmd, &project)
	workloadArg(cmd)
	outputFlag(cmd, &output)
	cmd.Flags().DurationVar(&since, "since", time.Hour, "how far back")
	cmd.Flags().StringSliceVar(&types, "type", nil, "only these metrics (gpu-utilization, gpu-memory-used-bytes, cpu-usage-cores, memory-usage-bytes, allocated-gpus, ...)")
	return cmd
}

// printReports prints reports as a table, or JSON/YAML.
func printReports(w io.Writer, output string, list bool, rs ...*metricsv1.Report) error {
	if output != formatTable {
		return printMessages(w, output, list, rs...)
	}
	tb := newTable(w, "Report", "Status", "Segment", "Start", "End", "Rows", "Creator")
	for _, r := range rs {
		tb.row(sdk.ID(r.GetName()), enumLabel(r.GetState().String(), "REPORT_STATE_"), enumLabel(r.GetSegmentBy().String(), "REPORT_SEGMENT_"),
			r.GetStartTime().AsTime().Local().Format(time.DateTime), r.GetEndTime().AsTime().Local().Format(time.DateTime),
			strconv.Itoa(int(r.GetRowCount())), r.GetCreator())
	}
	return tb.flush()
}

func reportCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "report", Aliases: []string{"reports"}, Short: "Consumption reports: GPU-hours, CPU core-hours and memory GiB-hours as CSV"}
	cmd.AddCommand(reportCreateCommand(), reportListCommand(), reportDescribeCommand(), reportDownloadCommand(),
		deleteCommand("report", "Delete a report and its CSV", func(ctx context.Context, c *sdk.Client, id string) error {
			_, err := c.ReportService.DeleteReport(ctx, &metricsv1.DeleteReportRequest{Name: "reports/" + id})
			return err
		}))
	return cmd
}

func reportCreateCommand() *cobra.Command {
	var (
		r                       metricsv1.Report
		start, end, segment, dn string
		since                   time.Duration
		output                  string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a consumption report (computed in the background; see report list)",
		Example: "  runway report create october --start 2026-10-01T00:00:00Z --end 2026-11-01T00:00:00Z --segment-by department\n" +
			"  runway report create last-day --since 24h --project team-a",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			now := time.Now()
			to := now
			if end != "" {
				t, err := time.Parse(time.RFC3339, end)
				if err != nil {
					return usageError("--end %q: want RFC 3339, like 2026-11-01T00:00:00Z", end)
				}
				to = t
			}
			from := to.Add(-since)
			if start != "" {
				t, err := time.Parse(time.RFC3339, start)
				if err != nil {
					return usageError("--start %q: want RFC 3339, like 2026-10-01T00:00:00Z", start)
				}
				from = t
			}
			seg, ok := metricsv1.ReportSegment_value["REPORT_SEGMENT_"+strings.ToUpper(strings.ReplaceAll(segment, "-", "_"))]
			if !ok || seg == 0 {
				return usageError("--segment-by %q: want project, department or node-pool", segment)
			}
			r.SegmentBy = metricsv1.ReportSegment(seg)
			r.StartTime, r.EndTime = timestamppb.New(from), timestamppb.New(to)
			r.DisplayName = dn
			if r.DisplayName == "" {
				r.DisplayName = args[0]
			}
			if r.Project != "" {
				r.Project = "projects/" + r.Project
			}
			if r.Department != "" {
				r.Department = "departments/" + r.Department
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				out, err := c.ReportService.CreateReport(ctx, &metricsv1.CreateReportRequest{ReportId: args[0], Report: &r})
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(cmd.OutOrStdout(), output, false, out)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "report %q created (pending)\n", args[0])
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&start, "start", "", "the window's start, RFC 3339 (default: --end minus --since)")
	f.StringVar(&end, "end", "", "the window's end, RFC 3339 (default: now)")
	f.DurationVar(&since, "since", 24*time.Hour, "the window's length when --start is not given")
	f.StringVar(&r.Project, "project", "", "only this project")
	f.StringVar(&r.Department, "department", "", "only this department")
	f.StringVar(&segment, "segment-by", "project", "a row per project, department or node-pool (and node pool)")
	f.StringVar(&r.Description, "description", "", "what the report is for")
	f.StringVar(&dn, "display-name", "", "a name for people (default: NAME)")
	outputFlag(cmd, &output)
	return cmd
}

func reportListCommand() *cobra.Command {
	var output string
	var watch bool
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the reports you may see, newest first, with their status",
		Example: "  runway report list\n  runway report list --watch",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				resp, err := c.ReportService.ListReports(ctx, &metricsv1.ListReportsRequest{PageSize: 500})
				if err != nil {
					return err
				}
				return printReports(w, output, true, resp.GetReports()...)
			})
		},
	}
	outputFlag(cmd, &output)
	watchFlag(cmd, &watch)
	return cmd
}

func reportDescribeCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "describe NAME",
		Short:   "Show one report",
		Example: "  runway report describe october -o yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				r, err := c.ReportService.GetReport(ctx, &metricsv1.GetReportRequest{Name: "reports/" + args[0]})
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(cmd.OutOrStdout(), output, false, r)
				}
				w := cmd.OutOrStdout()
				filter := "every project"
				if r.GetProject() != "" {
					filter = r.GetProject()
				} else if r.GetDepartment() != "" {
					filter = r.GetDepartment()
				}
				fmt.Fprintf(w, "Name:        %s\nDisplay:     %s\nStatus:      %s\nSegment by:  %s\nOver:        %s\nWindow:      %s to %s\nRows:        %d\nCreator:     %s\n",
					sdk.ID(r.GetName()), r.GetDisplayName(), enumLabel(r.GetState().String(), "REPORT_STATE_"),
					enumLabel(r.GetSegmentBy().String(), "REPORT_SEGMENT_"), filter,
					r.GetStartTime().AsTime().Local().Format(time.DateTime), r.GetEndTime().AsTime().Local().Format(time.DateTime),
					r.GetRowCount(), r.GetCreator())
				if r.GetErrorMessage() != "" {
					fmt.Fprintf(w, "Error:       %s\n", r.GetErrorMessage())
				}
				return nil
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func reportDownloadCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "download NAME",
		Short:   "Print a ready report's CSV",
		Example: "  runway report download october > october.csv",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				r, err := c.ReportService.DownloadReport(ctx, &metricsv1.DownloadReportRequest{Name: "reports/" + args[0]})
				if err != nil {
					return err
				}
				_, err = io.WriteString(cmd.OutOrStdout(), r.GetCsv())
				return err
			})
		},
	}
}
