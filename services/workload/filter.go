package workload

import (
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// filter is a parsed AIP-160 filter of the subset ListWorkloadsRequest
// documents: comparisons `field = value` or `field != value` joined by AND.
// The zero filter matches everything.
type filter []comparison

type comparison struct {
	field string
	value string // normalised: full enum value names for enum fields
	equal bool   // "=", else "!="
}

// filterFields are the supported fields and how each reads a workload.
var filterFields = map[string]struct {
	enum protoreflect.EnumDescriptor // nil for string fields
	get  func(*workloadv1.Workload) string
}{
	"type": {workloadv1.WorkloadType(0).Descriptor(), func(w *workloadv1.Workload) string {
		return w.GetType().String()
	}},
	"status.phase": {workloadv1.WorkloadPhase(0).Descriptor(), func(w *workloadv1.Workload) string {
		return w.GetStatus().GetPhase().String()
	}},
	"status.node_pool": {nil, func(w *workloadv1.Workload) string { return w.GetStatus().GetNodePool() }},
	"spec.priority": {nil, func(w *workloadv1.Workload) string {
		p, err := clusterproto.EffectivePriority(w)
		if err != nil {
			return w.GetSpec().GetPriority()
		}
		return p.Name
	}},
}

// parseFilter parses expr; an error is INVALID_FILTER naming what is wrong.
func parseFilter(expr string) (filter, error) {
	toks, err := scanFilter(expr)
	if err != nil {
		return nil, apierr.InvalidFilter(expr, err.Error())
	}
	var f filter
	for i := 0; i < len(toks); {
		if i > 0 {
			if toks[i].text != "AND" || toks[i].quoted {
				return nil, apierr.InvalidFilter(expr, fmt.Sprintf("expected AND before %q; comparisons are joined by AND", toks[i].text))
			}
			i++
		}
		if i+3 > len(toks) {
			return nil, apierr.InvalidFilter(expr, "expected a comparison such as status.phase = PENDING")
		}
		c, err := compile(toks[i], toks[i+1], toks[i+2])
		if err != nil {
			return nil, apierr.InvalidFilter(expr, err.Error())
		}
		f = append(f, c)
		i += 3
	}
	return f, nil
}

func compile(field, op, value token) (comparison, error) {
	def, ok := filterFields[field.text]
	key, isLabel := strings.CutPrefix(field.text, labelsField)
	if isLabel && !field.quoted {
		if why := labelKeyProblem(key); why != "" && !strings.Contains(why, "platform's") {
			return comparison{}, fmt.Errorf("%s: label %s", field.text, why)
		}
	} else if !ok || field.quoted {
		return comparison{}, fmt.Errorf("field %q cannot be filtered on; use type, status.phase, status.node_pool, spec.priority or labels.KEY", field.text)
	}
	if op.quoted || (op.text != "=" && op.text != "!=") {
		return comparison{}, fmt.Errorf("expected = or != after %s", field.text)
	}
	c := comparison{field: field.text, value: value.text, equal: op.text == "="}
	if def.enum != nil {
		full, ok := enumValue(def.enum, value.text)
		if !ok {
			return comparison{}, fmt.Errorf("%s has no value %q", field.text, value.text)
		}
		c.value = full
	}
	return c, nil
}

// enumValue accepts a value by its full name (WORKLOAD_PHASE_PENDING) or
// without the enum's prefix (PENDING), and returns the full name.
func enumValue(enum protoreflect.EnumDescriptor, v string) (string, bool) {
	values := enum.Values()
	prefix := strings.TrimSuffix(string(values.Get(0).Name()), "UNSPECIFIED")
	for _, name := range []string{v, prefix + v} {
		if ev := values.ByName(protoreflect.Name(name)); ev != nil && ev.Number() != 0 {
			return name, true
		}
	}
	return "", false
}

// labelsField starts a filter on one label: `labels.team = "vision"`.
const labelsField = "labels."

func (f filter) matches(w *workloadv1.Workload) bool {
	for _, c := range f {
		var got string
		if key, ok := strings.CutPrefix(c.field, labelsField); ok {
			got = w.GetLabels()[key]
		} else {
			got = filterFields[c.field].get(w)
		}
		if (got == c.value) != c.equal {
			return false
		}
	}
	return true
}

// token is a word, an operator or a quoted string of a filter.
type token struct {
	text   string
	quoted bool
}

// scanFilter splits a filter into words, the operators = and !=, and
// double-quoted strings (Go escapes allowed).
func scanFilter(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '=':
			toks = append(toks, token{text: "="})
			i++
		case c == '!':
			if i+1 >= len(s) || s[i+1] != '=' {
				return nil, fmt.Errorf("unexpected ! at offset %d; the operators are = and !=", i)
			}
			toks = append(toks, token{text: "!="})
			i += 2
		case c == '"':
			q, err := strconv.QuotedPrefix(s[i:])
			if err != nil {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			text, _ := strconv.Unquote(q)
			toks = append(toks, token{text: text, quoted: true})
			i += len(q)
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n=!\"", rune(s[j])) {
				j++
			}
			toks = append(toks, token{text: s[i:j]})
			i = j
		}
	}
	return toks, nil
}
