package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// field is one policy-addressable field of WorkloadSpec: a path of field
// descriptors from the spec down to a leaf.
type field struct {
	json  string // "gpu.devices": the JSON path, the name policies use
	proto string // "gpu.devices": the proto path, the name errors use
	path  []protoreflect.FieldDescriptor
}

// fields are every leaf of WorkloadSpec a policy may speak of, by JSON
// path, and byName finds one by JSON or proto path.
var (
	fields []field
	byName = map[string]*field{}
)

func init() {
	var walk func(md protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor)
	walk = func(md protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor) {
		fds := md.Fields()
		for i := range fds.Len() {
			fd := fds.Get(i)
			path := append(slices.Clone(prefix), fd)
			if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() {
				walk(fd.Message(), path)
				continue
			}
			var js, ps []string
			for _, p := range path {
				js = append(js, p.JSONName())
				ps = append(ps, string(p.Name()))
			}
			fields = append(fields, field{json: strings.Join(js, "."), proto: strings.Join(ps, "."), path: path})
		}
	}
	walk((&workloadv1.WorkloadSpec{}).ProtoReflect().Descriptor(), nil)
	for i := range fields {
		byName[fields[i].json] = &fields[i]
		byName[fields[i].proto] = &fields[i]
	}
}

// Fields lists the JSON paths a policy may name, in spec order.
func Fields() []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.json
	}
	return out
}

// Canonical returns the JSON path of a field named by its JSON or proto
// path, and false for a name that is not a field of WorkloadSpec.
func Canonical(name string) (string, bool) {
	f, ok := byName[name]
	if !ok {
		return "", false
	}
	return f.json, true
}

// ProtoPath is the proto path ("gpu.fraction_milli") of a JSON path, for
// error field paths; the name itself when unknown.
func ProtoPath(name string) string {
	if f, ok := byName[name]; ok {
		return f.proto
	}
	return name
}

func (f *field) leaf() protoreflect.FieldDescriptor { return f.path[len(f.path)-1] }

func (f *field) numeric() bool {
	switch f.leaf().Kind() {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind,
		protoreflect.Sint32Kind, protoreflect.Sint64Kind, protoreflect.DoubleKind, protoreflect.FloatKind:
		return !f.leaf().IsList()
	}
	return false
}

// has reports whether the spec gives the field a value: a set oneof member
// or a non-zero scalar, a non-empty list.
func (f *field) has(spec *workloadv1.WorkloadSpec) bool {
	m := spec.ProtoReflect()
	for _, fd := range f.path[:len(f.path)-1] {
		if !m.Has(fd) {
			return false
		}
		m = m.Get(fd).Message()
	}
	return m.Has(f.leaf())
}

// unsetForDefault reports whether a default may fill the field: a default for a
// member of a oneof (gpu.devices) applies only when no member of that
// oneof is set, so that a default never turns one GPU request into two.
func (f *field) unsetForDefault(spec *workloadv1.WorkloadSpec) bool {
	if od := f.leaf().ContainingOneof(); od != nil && !od.IsSynthetic() {
		m := spec.ProtoReflect()
		for _, fd := range f.path[:len(f.path)-1] {
			if !m.Has(fd) {
				return true
			}
			m = m.Get(fd).Message()
		}
		return m.WhichOneof(od) == nil
	}
	return !f.has(spec)
}

func (f *field) get(spec *workloadv1.WorkloadSpec) protoreflect.Value {
	m := spec.ProtoReflect()
	for _, fd := range f.path[:len(f.path)-1] {
		m = m.Get(fd).Message()
	}
	return m.Get(f.leaf())
}

// copyFrom sets the field of dst to its value in src (which has it).
func (f *field) copyFrom(dst, src *workloadv1.WorkloadSpec) {
	d, s := dst.ProtoReflect(), src.ProtoReflect()
	for _, fd := range f.path[:len(f.path)-1] {
		d, s = d.Mutable(fd).Message(), s.Get(fd).Message()
	}
	v := s.Get(f.leaf())
	if f.leaf().IsList() {
		l := d.Mutable(f.leaf()).List()
		l.Truncate(0)
		for i := range v.List().Len() {
			l.Append(v.List().Get(i))
		}
		return
	}
	d.Set(f.leaf(), v)
}

// number is a numeric field's value as a float64.
func (f *field) number(spec *workloadv1.WorkloadSpec) float64 {
	v := f.get(spec)
	switch f.leaf().Kind() {
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return float64(v.Int())
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return float64(v.Uint())
	default:
		return v.Float()
	}
}

// texts is the field's value as text, one entry per list element: numbers
// in decimal, enums by name, messages in their text form.
func (f *field) texts(spec *workloadv1.WorkloadSpec) []string {
	v := f.get(spec)
	if f.leaf().IsList() {
		out := make([]string, v.List().Len())
		for i := range out {
			out[i] = scalarText(f.leaf(), v.List().Get(i))
		}
		return out
	}
	return []string{scalarText(f.leaf(), v)}
}

// text is the field's value as text (list elements joined with ","), for
// showing a default.
func (f *field) text(spec *workloadv1.WorkloadSpec) string { return strings.Join(f.texts(spec), ",") }

func scalarText(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return v.String()
	case protoreflect.BoolKind:
		return strconv.FormatBool(v.Bool())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.MessageKind:
		return fmt.Sprint(v.Message().Interface())
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind:
		return strconv.FormatUint(v.Uint(), 10)
	default:
		return strconv.FormatInt(v.Int(), 10)
	}
}
