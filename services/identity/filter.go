package identity

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/runwayhq/runway/pkg/apierr"
)

// filter is the AIP-160 subset the List methods document: comparisons
// `field OP value` joined by AND, OP one of = != : >= < (":" is "has" for a
// list field and "starts with" for a string field). Values may be quoted.
type filter []comparison

type comparison struct {
	field, op, value string
}

var comparisonRE = regexp.MustCompile(`^\s*([a-z_.]+)\s*(!=|>=|<=|=|:|<|>)\s*(.+?)\s*$`)

func parseFilter(expr string, fields map[string]bool) (filter, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, nil
	}
	var f filter
	for _, part := range strings.Split(expr, " AND ") {
		m := comparisonRE.FindStringSubmatch(part)
		if m == nil {
			return nil, apierr.InvalidFilter(expr, "write comparisons such as field = \"value\" joined by AND")
		}
		if !fields[m[1]] {
			return nil, apierr.InvalidFilter(expr, "field "+strconv.Quote(m[1])+" is not supported")
		}
		v := m[3]
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		f = append(f, comparison{field: m[1], op: m[2], value: v})
	}
	return f, nil
}

// matches tests values, each field's values as strings (a list field has
// several). Ordered comparisons compare strings, which is right for the
// fixed-width and RFC 3339 values they are used with.
func (f filter) matches(values map[string][]string) bool {
	for _, c := range f {
		vs := values[c.field]
		var ok bool
		switch c.op {
		case "=":
			ok = len(vs) == 1 && vs[0] == c.value
		case "!=":
			ok = len(vs) != 1 || vs[0] != c.value
		case ":":
			ok = slices.Contains(vs, c.value) || len(vs) == 1 && strings.HasPrefix(vs[0], c.value)
		case ">=":
			ok = len(vs) == 1 && vs[0] >= c.value
		case "<=":
			ok = len(vs) == 1 && vs[0] <= c.value
		case ">":
			ok = len(vs) == 1 && vs[0] > c.value
		case "<":
			ok = len(vs) == 1 && vs[0] < c.value
		}
		if !ok {
			return false
		}
	}
	return true
}
