package sdk

import "strings"

// AllProjects lists across every project the caller may see (AIP-159).
const AllProjects = "-"

// Resource names (AIP-122) of Runway's resources.
func ProjectName(project string) string       { return "projects/" + project }
func DepartmentName(department string) string { return "departments/" + department }
func NodePoolName(pool string) string         { return "nodepools/" + pool }
func NodeName(node string) string             { return "nodes/" + node }
func WorkloadName(project, workload string) string {
	return "projects/" + project + "/workloads/" + workload
}

// ID is the last segment of a resource name: "a1" for
// "projects/team-a/workloads/a1".
func ID(name string) string { return name[strings.LastIndexByte(name, '/')+1:] }

// ProjectOf is the project id in a workload name: "team-a" for
// "projects/team-a/workloads/a1"; "" for a name of another shape.
func ProjectOf(workload string) string {
	rest, ok := strings.CutPrefix(workload, "projects/")
	if !ok {
		return ""
	}
	p, _, _ := strings.Cut(rest, "/")
	return p
}
