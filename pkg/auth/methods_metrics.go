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
