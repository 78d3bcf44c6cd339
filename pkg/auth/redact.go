package auth

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// hiddenWorkload stands for a workload the caller may not view.
const hiddenWorkload = "projects/-/workloads/-"

// redact replaces, in a response about the cluster (a node and what holds
// its GPUs, a time-slicing plan, a scheduling decision), the names of
// workloads the caller may not view: fields named workload or workloads
// holding `projects/{p}/workloads/{w}`. What is held stays visible (a node's
// capacity is everyone's business); whose it is does not.
func (g *Guard) redact(c Caller, resp any) {
	m, ok := resp.(proto.Message)
	if !ok || m == nil {
		return
	}
	g.redactMessage(c, m.ProtoReflect(), map[string]bool{})
}

func (g *Guard) redactMessage(c Caller, m protoreflect.Message, seen map[string]bool) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() == protoreflect.StringKind && (fd.Name() == "workload" || fd.Name() == "workloads"):
			if fd.IsList() {
				l := v.List()
				for i := range l.Len() {
					l.Set(i, protoreflect.ValueOfString(g.visibleWorkload(c, l.Get(i).String(), seen)))
				}
			} else if !fd.IsMap() {
				m.Set(fd, protoreflect.ValueOfString(g.visibleWorkload(c, v.String(), seen)))
			}
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			l := v.List()
			for i := range l.Len() {
				g.redactMessage(c, l.Get(i).Message(), seen)
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			g.redactMessage(c, v.Message(), seen)
		}
		return true
	})
}

// visibleWorkload is name, or hiddenWorkload when c may not view it; seen
// caches the answer per project.
func (g *Guard) visibleWorkload(c Caller, name string, seen map[string]bool) string {
	p := projectOf(name)
	if p == "" {
		return name
	}
	ok, cached := seen[p]
	if !cached {
		ok, _ = g.Allowed(c, perm(Workloads, View), g.ProjectTarget(p, name), nil)
		seen[p] = ok
	}
	if ok {
		return name
	}
	return hiddenWorkload
}
