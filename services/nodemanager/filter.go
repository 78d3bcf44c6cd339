package nodemanager

import (
	"fmt"
	"regexp"
	"strings"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// filter is a ListNodes filter: comparisons joined by AND, all of which a
// node must match. Supported (node_manager_service.proto): node_pool = "x",
// readiness = READY, drained = true, labels.KEY = "value".
type filter []comparison

type comparison struct {
	field, value string
}

var comparisonRe = regexp.MustCompile(`^\s*([A-Za-z0-9_./-]+)\s*=\s*(?:"([^"]*)"|(\S+))\s*$`)

func parseFilter(expr string) (filter, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil
	}
	var f filter
	for _, part := range strings.Split(expr, " AND ") {
		m := comparisonRe.FindStringSubmatch(part)
		if m == nil {
			return nil, apierr.InvalidFilter(expr, fmt.Sprintf("%q is not a comparison such as readiness = READY; join comparisons with AND", strings.TrimSpace(part)))
		}
		c := comparison{field: m[1], value: m[2] + m[3]}
		switch {
		case c.field == "node_pool", strings.HasPrefix(c.field, "labels.") && len(c.field) > len("labels."):
		case c.field == "readiness":
			c.value = strings.TrimPrefix(c.value, "READINESS_")
			if v, ok := nodemanagerv1.Readiness_value["READINESS_"+c.value]; !ok || v == 0 {
				return nil, apierr.InvalidFilter(expr, "readiness is READY or NOT_READY")
			}
		case c.field == "drained":
			if c.value != "true" && c.value != "false" {
				return nil, apierr.InvalidFilter(expr, "drained is true or false")
			}
		default:
			return nil, apierr.InvalidFilter(expr, fmt.Sprintf("field %q cannot be filtered on; use node_pool, readiness, drained or labels.KEY", c.field))
		}
		f = append(f, c)
	}
	return f, nil
}

func (f filter) matches(n *nodemanagerv1.Node) bool {
	for _, c := range f {
		var got string
		switch {
		case c.field == "node_pool":
			got = n.GetNodePool()
		case c.field == "readiness":
			got = strings.TrimPrefix(n.GetReadiness().String(), "READINESS_")
		case c.field == "drained":
			got = fmt.Sprint(n.GetDrained())
		default:
			v, ok := n.GetLabels()[strings.TrimPrefix(c.field, "labels.")]
			if !ok {
				return false
			}
			got = v
		}
		if got != c.value {
			return false
		}
	}
	return true
}
