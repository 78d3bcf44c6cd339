package workload

import (
	"regexp"
	"strings"

	"github.com/runwayhq/runway/pkg/clusterproto"
)

// Resource names (proto/README.md "Resources and REST paths").
const (
	projectsPrefix  = "projects/"
	workloadsInfix  = "/workloads/"
	nodePoolsPrefix = "nodepools/"
	// AllProjects is the parent that lists or watches every project (AIP-159).
	AllProjects = "projects/-"
)

// idPattern is the id rule of every Runway resource: 1-63 characters of
// [a-z0-9-], starting with a letter (proto/README.md).
var idPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// idRule is idPattern said as what the value must be, for field violations.
const idRule = "must be 1-63 characters of [a-z0-9-] starting with a letter"

func validID(id string) bool { return idPattern.MatchString(id) }

// WorkloadName is the resource name of workload id in project id project.
func WorkloadName(project, id string) string {
	return projectsPrefix + project + workloadsInfix + id
}

// ParseWorkloadName splits `projects/{project}/workloads/{workload}` into
// its two ids; ok is false unless both are valid ids.
func ParseWorkloadName(name string) (project, id string, ok bool) {
	return clusterproto.ParseWorkloadName(name)
}

// parseParent splits `projects/{project}` into its id; with allowAll,
// `projects/-` is accepted and yields "-".
func parseParent(parent string, allowAll bool) (project string, ok bool) {
	if allowAll && parent == AllProjects {
		return "-", true
	}
	id, found := strings.CutPrefix(parent, projectsPrefix)
	if !found || !validID(id) {
		return "", false
	}
	return id, true
}
