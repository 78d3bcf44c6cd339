package nodemanager

import (
	"crypto/rand"
	"fmt"
	"regexp"
	"strings"

	"github.com/runwayhq/runway/pkg/apierr"
)

const (
	nodesPrefix     = "nodes/"
	nodePoolsPrefix = "nodepools/"
	planSuffix      = "/timeSlicePlan"
)

var (
	nodeIDRe   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	workloadRe = regexp.MustCompile(`^projects/([a-z0-9][a-z0-9-]*)/workloads/([a-z0-9][a-z0-9-]*)$`)
)

// NodeName is the resource name of a node id: "nodes/{node}".
func NodeName(node string) string { return nodesPrefix + node }

// ValidNodeID reports whether id is a valid node id (1-63 of [a-z0-9-],
// starting and ending with a letter or digit).
func ValidNodeID(id string) bool { return nodeIDRe.MatchString(id) }

// nodeOf parses "nodes/{node}" from the request field named field.
func nodeOf(field, name string) (string, error) {
	id, ok := strings.CutPrefix(name, nodesPrefix)
	if !ok || !ValidNodeID(id) {
		return "", apierr.InvalidField(field, "must be nodes/{node}, the node id being 1-63 characters of [a-z0-9-]")
	}
	return id, nil
}

// ParseWorkload splits "projects/{project}/workloads/{workload}".
func ParseWorkload(name string) (project, workload string, ok bool) {
	m := workloadRe.FindStringSubmatch(name)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// NewUID is a random (version 4) UUID, a registration's Node.uid.
func NewUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
