package scenario

// The parser's access to YAML nodes: mappings with checked keys, lists,
// and typed scalar values, each failing with the node's line.

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// --- generic YAML access ---

// fields is a mapping whose keys have been checked against those allowed.
type fields struct {
	what string // context for messages, such as "nodes[2]"
	node *yaml.Node
	vals map[string]*yaml.Node // for lookup only, never iterated
}

// get returns the value of key, or nil when it is absent or null: YAML's
// "key:" with no value means the same as leaving the key out.
func (f fields) get(key string) *yaml.Node {
	if n := f.vals[key]; n != nil && !isNull(n) {
		return n
	}
	return nil
}

// fields checks a mapping's keys; nil or null stands for an empty mapping.
func (p *parser) fields(n *yaml.Node, what string, allowed ...string) fields {
	f := fields{what: what, node: n, vals: map[string]*yaml.Node{}}
	if n == nil || isNull(n) {
		f.node = &yaml.Node{}
		return f
	}
	for _, kv := range p.pairs(n, what) {
		if !slices.Contains(allowed, kv.key.Value) {
			p.fail(kv.key, "%s: unknown field %q (want one of %s)", what, kv.key.Value, strings.Join(allowed, ", "))
			continue
		}
		f.vals[kv.key.Value] = kv.val
	}
	return f
}

type pair struct{ key, val *yaml.Node }

// pairs returns a mapping's entries in file order. Duplicate keys are an
// error: yaml.v3 keeps both in a Node, and one would silently win.
func (p *parser) pairs(n *yaml.Node, what string) []pair {
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n, "%s: want a mapping, got %s", what, describe(n))
		return nil
	}
	var out []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		switch {
		case k.Kind != yaml.ScalarNode:
			p.fail(k, "%s: want a plain key, got %s", what, describe(k))
		case k.ShortTag() == "!!merge":
			p.fail(k, "%s: merge keys (<<) are not supported", what)
		case slices.ContainsFunc(out, func(o pair) bool { return o.key.Value == k.Value }):
			p.fail(k, "%s: duplicate key %q", what, k.Value)
		default:
			out = append(out, pair{k, v})
		}
	}
	return out
}

// items returns a list's elements (nil for an absent list), aliases resolved.
func (p *parser) items(n *yaml.Node, what string) []*yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "%s: want a list, got %s", what, describe(n))
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = resolve(c)
	}
	return out
}

// resolve follows an alias (*name) to the node it stands for.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func describe(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case isNull(n):
		return "nothing"
	}
	return strconv.Quote(n.Value)
}

// --- typed values ---

// required returns a field that must be present and non-empty.
func (p *parser) required(f fields, key string) string {
	n := f.get(key)
	if n == nil {
		p.fail(f.node, "%s: %s is required", f.what, key)
		return ""
	}
	return p.scalar(n, f.what+": "+key)
}

// scalar returns a non-empty text value. Numbers are accepted as text
// (a node may be called 1), lists and mappings are not.
func (p *parser) scalar(n *yaml.Node, what string) string {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.fail(n, "%s: want a name or text, got %s", what, describe(n))
		return ""
	}
	if n.Value == "" {
		p.fail(n, "%s: must not be empty", what)
	}
	return n.Value
}

// names returns a list of scalar values.
func (p *parser) names(n *yaml.Node, what string) []string {
	items := p.items(n, what)
	out := make([]string, 0, len(items))
	for _, item := range items {
		out = append(out, p.scalar(item, what))
	}
	return out
}

func (p *parser) number(n *yaml.Node, what string) float64 {
	var v float64
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&v) != nil ||
		math.IsNaN(v) || math.IsInf(v, 0) {
		p.fail(n, "%s: want a number, got %s", what, describe(n))
		return 0
	}
	return v
}

func (p *parser) whole(n *yaml.Node, what string) int {
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		p.fail(n, "%s: want a whole number, got %s", what, describe(n))
		return 0
	}
	return v
}

func (p *parser) duration(n *yaml.Node, what string) time.Duration {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.fail(n, "%s: want a duration such as 90s, 30m, 2h or 7d, got %s", what, describe(n))
		return 0
	}
	d, err := ParseDuration(n.Value)
	switch {
	case err != nil:
		p.fail(n, "%s: %v (want e.g. 90s, 30m, 2h, 7d)", what, err)
	case d <= 0:
		p.fail(n, "%s: must be more than 0, got %s", what, n.Value)
	}
	return d
}

func (p *parser) optFloat(f fields, key string, def, min float64) float64 {
	n := f.get(key)
	if n == nil {
		return def
	}
	v := p.number(n, f.what+": "+key)
	if v < min {
		p.fail(n, "%s: %s: must be at least %v, got %v", f.what, key, min, v)
	}
	return v
}

func (p *parser) optFloatPtr(f fields, key string, min float64) *float64 {
	if f.get(key) == nil {
		return nil
	}
	return ptr(p.optFloat(f, key, 0, min))
}

// optUnlimited reads a value where -1 means unlimited, the default.
func (p *parser) optUnlimited(f fields, key string) float64 {
	n := f.get(key)
	if n == nil {
		return -1
	}
	v := p.number(n, f.what+": "+key)
	if v < 0 && v != -1 {
		p.fail(n, "%s: %s: want -1 (unlimited) or a value of at least 0, got %v", f.what, key, v)
	}
	return v
}

func (p *parser) optInt(f fields, key string, def, min int) int {
	n := f.get(key)
	if n == nil {
		return def
	}
	v := p.whole(n, f.what+": "+key)
	if v < min {
		p.fail(n, "%s: %s: must be at least %d, got %d", f.what, key, min, v)
	}
	return v
}

func (p *parser) optIntPtr(f fields, key string, min int) *int {
	if f.get(key) == nil {
		return nil
	}
	return ptr(p.optInt(f, key, 0, min))
}

func (p *parser) optBool(f fields, key string, def bool) bool {
	n := f.get(key)
	if n == nil {
		return def
	}
	var v bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		p.fail(n, "%s: %s: want true or false, got %s", f.what, key, describe(n))
	}
	return v
}

func (p *parser) optDuration(f fields, key string, def time.Duration) time.Duration {
	n := f.get(key)
	if n == nil {
		return def
	}
	return p.duration(n, f.what+": "+key)
}

func (p *parser) optOneOf(f fields, key, def string, choices ...string) string {
	n := f.get(key)
	if n == nil {
		return def
	}
	v := p.scalar(n, f.what+": "+key)
	if p.err == nil && !slices.Contains(choices, v) {
		p.fail(n, "%s: %s: %q is not one of %s", f.what, key, v, strings.Join(choices, ", "))
	}
	return v
}

// optPool reads a node pool name, "default" when absent.
func (p *parser) optPool(f fields, key string) string {
	n := f.get(key)
	if n == nil {
		return "default"
	}
	pool := p.scalar(n, f.what+": "+key)
	if p.err == nil && !p.pools[pool] {
		p.fail(n, "%s: node pool %q is not declared", f.what, pool)
	}
	return pool
}
