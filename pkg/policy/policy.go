package policy

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// Layer is the policy one scope sets for a workload type. Source is the
// policy's resource name ("departments/research/policies/training"), which
// errors and the effective policy quote.
type Layer struct {
	Source string
	Policy *workloadv1.Policy
}

// Violation is one problem with a policy or a submission: the field (a JSON
// path for policies, the spec's proto path for submissions) and what is
// wrong, said as what it must be.
type Violation struct {
	Field       string
	Description string
}

// Normalize rewrites the rule keys of p to their JSON paths and reports the
// keys that name no field of WorkloadSpec and rules that cannot hold (min
// above max, a step that is not positive, bounds on a field that is not a
// number). Violation fields are request paths under "policy.".
func Normalize(p *workloadv1.Policy) []Violation {
	var out []Violation
	rules := map[string]*workloadv1.FieldRule{}
	keys := make([]string, 0, len(p.GetRules()))
	for k := range p.GetRules() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := p.GetRules()[k]
		at := fmt.Sprintf("policy.rules[%q]", k)
		name, ok := Canonical(k)
		if !ok {
			out = append(out, Violation{at, "must name a field of the workload spec in its JSON form, one of " + strings.Join(Fields(), ", ")})
			continue
		}
		if _, dup := rules[name]; dup {
			out = append(out, Violation{at, fmt.Sprintf("names field %q, which another key of rules already names", name)})
			continue
		}
		f := byName[name]
		if (r.Min != nil || r.Max != nil || r.Step != nil) && !f.numeric() {
			out = append(out, Violation{at, fmt.Sprintf("may set min, max and step only on a numeric field; %q is not one", name)})
		}
		if r.Min != nil && r.Max != nil && r.GetMin() > r.GetMax() {
			out = append(out, Violation{at + ".max", fmt.Sprintf("must be at least min (%s)", num(r.GetMin()))})
		}
		if r.Step != nil && r.GetStep() <= 0 {
			out = append(out, Violation{at + ".step", "must be more than 0"})
		}
		if relaxation(name) {
			out = append(out, checkRelaxationRule(at, name, r)...)
		}
		rules[name] = r
	}
	if len(rules) > 0 || p.Rules != nil {
		p.Rules = rules
	}
	return out
}

// Conflict returns the first field (in field order) that rules has a rule
// for and that one of others also rules, with the source of that other
// rule: a field's rule may be held by one scope of a branch only.
func Conflict(rules map[string]*workloadv1.FieldRule, others []Layer) (field, source string, found bool) {
	for _, f := range Fields() {
		if _, ok := rules[f]; !ok {
			continue
		}
		for _, o := range others {
			if _, ok := o.Policy.GetRules()[f]; ok {
				return f, o.Source, true
			}
		}
	}
	return "", "", false
}

// Effective is the policy in force: by JSON path, the default and the rule
// of each field that has either, with their sources.
type Effective struct {
	Defaults *workloadv1.WorkloadSpec
	Fields   map[string]*Entry
}

// Entry is what the effective policy says about one field.
type Entry struct {
	DefaultSource string // "" when the field has no default
	Rule          *workloadv1.FieldRule
	RuleSource    string
}

// Merge combines layers given from the top of the tree down (account,
// department, project): a field's default comes from the lowest layer that
// sets one; a field's rule from the highest layer that has one (the service
// rejects a second rule on a branch; should one exist anyway, for example
// after a project moved to another department, the wider scope wins).
func Merge(layers []Layer) *Effective {
	eff := &Effective{Defaults: &workloadv1.WorkloadSpec{}, Fields: map[string]*Entry{}}
	entry := func(name string) *Entry {
		if eff.Fields[name] == nil {
			eff.Fields[name] = &Entry{}
		}
		return eff.Fields[name]
	}
	for _, l := range layers {
		d := l.Policy.GetDefaults()
		for i := range fields {
			f := &fields[i]
			if d != nil && f.has(d) {
				if od := f.leaf().ContainingOneof(); od != nil && !od.IsSynthetic() {
					// A lower layer's GPU amount replaces the upper one's whole.
					clearOneof(eff.Defaults, f)
					for j := range fields {
						if g := &fields[j]; g.leaf().ContainingOneof() == od && eff.Fields[g.json] != nil {
							eff.Fields[g.json].DefaultSource = ""
						}
					}
				}
				f.copyFrom(eff.Defaults, d)
				entry(f.json).DefaultSource = l.Source
			}
			if r, ok := l.Policy.GetRules()[f.json]; ok && entry(f.json).Rule == nil {
				e := entry(f.json)
				e.Rule, e.RuleSource = r, l.Source
			}
		}
	}
	for name, e := range eff.Fields {
		if e.Rule == nil && e.DefaultSource == "" {
			delete(eff.Fields, name)
		}
	}
	return eff
}

func clearOneof(spec *workloadv1.WorkloadSpec, f *field) {
	m := spec.ProtoReflect()
	for _, fd := range f.path[:len(f.path)-1] {
		if !m.Has(fd) {
			return
		}
		m = m.Mutable(fd).Message()
	}
	if fd := m.WhichOneof(f.leaf().ContainingOneof()); fd != nil {
		m.Clear(fd)
	}
}

// Names lists the fields of the effective policy in field order.
func (e *Effective) Names() []string {
	var out []string
	for _, f := range Fields() {
		if e.Fields[f] != nil {
			out = append(out, f)
		}
	}
	return out
}

// DefaultText is the default of a field as text, "" when it has none.
func (e *Effective) DefaultText(name string) string {
	if x := e.Fields[name]; x == nil || x.DefaultSource == "" {
		return ""
	}
	return byName[name].text(e.Defaults)
}

// Apply returns a copy of spec with the defaults filled into the fields it
// leaves unset.
func (e *Effective) Apply(spec *workloadv1.WorkloadSpec) *workloadv1.WorkloadSpec {
	out := proto.Clone(spec).(*workloadv1.WorkloadSpec)
	for _, name := range e.Names() {
		f := byName[name]
		if e.Fields[name].DefaultSource != "" && f.unsetForDefault(out) {
			f.copyFrom(out, e.Defaults)
		}
	}
	return out
}

// Check checks a submission against the rules: submitted is the spec as
// the submitter gave it (for canEdit), final the spec with defaults
// applied. Violations name the spec's proto path under prefix
// ("workload.spec."), and each description names the rule, the field and
// the policy it comes from. A relaxation (Relaxations) set with no rule
// allowing it is a violation too.
func (e *Effective) Check(prefix string, submitted, final *workloadv1.WorkloadSpec) []Violation {
	out := e.checkRelaxations(prefix, final)
	for _, name := range e.Names() {
		x := e.Fields[name]
		r := x.Rule
		if r == nil {
			continue
		}
		f := byName[name]
		bad := func(rule, must string) {
			out = append(out, Violation{prefix + f.proto,
				fmt.Sprintf("%s (rule %q on field %q of policy %s)", must, rule, name, x.RuleSource)})
		}
		if r.CanEdit != nil && !r.GetCanEdit() && f.has(submitted) {
			switch {
			case x.DefaultSource == "":
				bad("canEdit", "may not be set")
			case f.text(submitted) != f.text(e.Defaults):
				bad("canEdit", fmt.Sprintf("may not be changed from its default %s", f.text(e.Defaults)))
			}
		}
		if !f.has(final) {
			if r.GetRequired() {
				bad("required", "is required")
			}
			continue
		}
		if f.numeric() {
			v := f.number(final)
			if r.Min != nil && v < r.GetMin() {
				bad("min", "must be at least "+num(r.GetMin()))
			}
			if r.Max != nil && v > r.GetMax() {
				bad("max", "must be at most "+num(r.GetMax()))
			}
			if r.Step != nil && r.GetStep() > 0 {
				if q := (v - r.GetMin()) / r.GetStep(); math.Abs(q-math.Round(q)) > 1e-9 {
					bad("step", fmt.Sprintf("must be %s plus a multiple of %s", num(r.GetMin()), num(r.GetStep())))
				}
			}
		}
		if len(r.GetOptions()) > 0 {
			for _, v := range f.texts(final) {
				if !slices.Contains(r.GetOptions(), v) {
					bad("options", "must be one of "+strings.Join(r.GetOptions(), ", "))
					break
				}
			}
		}
	}
	return out
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
