package auth

import (
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
)

const metricsSvc = "/runway.metrics.v1.MetricsService/"

// The MetricsService's methods: each entity's series need the view
// permission on that entity where it is; the cluster's need node pools'
// at the account. They live in their own file so that the service's
// declarations stay together.
func init() {
	for name, m := range map[string]Method{
		metricsSvc + "QueryWorkloadMetrics": {Perm: perm(Workloads, View), Target: inProject},
		metricsSvc + "QueryProjectMetrics": {Perm: perm(Projects, View),
			Target: func(g *Guard, r any) Target { return g.ProjectTarget(named(r), named(r)) }},
		metricsSvc + "QueryDepartmentMetrics": {Perm: perm(Departments, View),
			Target: func(_ *Guard, r any) Target { return departmentTarget(named(r)) }},
		metricsSvc + "QueryNodePoolMetrics": {Perm: perm(NodePools, View), Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
		metricsSvc + "QueryNodeMetrics":     {Perm: perm(Nodes, View), Target: func(_ *Guard, r any) Target { return anywhere(named(r)) }},
		metricsSvc + "QueryClusterMetrics":  {Perm: perm(NodePools, View), Target: func(_ *Guard, r any) Target { return account(named(r)) }},
		// Anyone who views a project somewhere reads the telemetry, with
		// only the projects they may view in it.
		metricsSvc + "GetTelemetry": {Perm: perm(Projects, View), Target: func(_ *Guard, r any) Target { return anywhere(named(r)) },
			Filter: func(g *Guard, resp any, ok keep) {
				t := resp.(*metricsv1.Telemetry)
				t.Projects = filterSlice(t.Projects, func(p *metricsv1.ProjectTelemetry) bool {
					return ok(g.ProjectTarget(p.GetProject(), p.GetProject()), Attrs{})
				})
			}},
	} {
		methods[name] = m
	}
}

const reportSvc = "/runway.metrics.v1.ReportService/"

// The ReportService's: a report over one project or department needs the
// view permission there, one over every project on the account; the
// others need projects' view somewhere, and the service shows a report to
// its creator and to account-wide project viewers only.
func init() {
	somewhere := func(_ *Guard, r any) Target { return anywhere("reports") }
	for name, m := range map[string]Method{
		reportSvc + "CreateReport": {Perm: perm(Projects, View), Target: func(g *Guard, r any) Target {
			rep := r.(*metricsv1.CreateReportRequest).GetReport()
			switch {
			case rep.GetProject() != "":
				return g.ProjectTarget(rep.GetProject(), rep.GetProject())
			case rep.GetDepartment() != "":
				return departmentTarget(rep.GetDepartment())
			}
			return account("reports")
		}},
		reportSvc + "GetReport":      {Perm: perm(Projects, View), Target: somewhere},
		reportSvc + "ListReports":    {Perm: perm(Projects, View), Target: somewhere},
		reportSvc + "DownloadReport": {Perm: perm(Projects, View), Target: somewhere},
		reportSvc + "DeleteReport":   {Perm: perm(Projects, View), Target: somewhere},
	} {
		methods[name] = m
	}
}
