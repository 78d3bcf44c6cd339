// Package bounds holds every request to the same limits before any handler
// sees it: the length of each string and bytes field, the entries of each
// list and map, the nesting of messages, and that page sizes are not
// negative. A request past a
// limit is refused with INVALID_ARGUMENT naming the field and the limit
// (pkg/apierr), so no service needs to remember to bound a field, and an
// unauthenticated caller (Login) cannot make the server hold more than the
// limits allow. The transport's own limit on a whole message (and the REST
// body) is pkg/grpcserver's; a service's own rules (an id's pattern, a
// workload's total environment size) stay in its validation.
package bounds

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/runwayhq/runway/pkg/apierr"
)

// The defaults: generous for every legitimate request of the API, small
// enough that a request within them is a few hundred KiB at worst.
const (
	String   = 4 << 10 // bytes of one string or bytes field
	Entries  = 1000    // entries of one list
	MapItems = 256     // entries of one map (labels, node selectors)
	Depth    = 32      // nesting of messages
)

// longer are the fields that legitimately carry more than String: an ID
// token, and a workload's environment values and arguments (a config blob
// passed in), whose total per workload the workload service bounds.
var longer = map[protoreflect.FullName]int{
	"runway.identity.v1.OidcCredentials.id_token": 16 << 10,
	"runway.workload.v1.EnvVar.value":             32 << 10,
	"runway.workload.v1.WorkloadSpec.command":     32 << 10,
	"runway.workload.v1.WorkloadSpec.args":        32 << 10,
}

// Check returns nil when msg is within the limits, else INVALID_ARGUMENT
// naming the first field past one (its path in the request, as
// "workload.spec.env[3].value").
func Check(msg proto.Message) error {
	if msg == nil {
		return nil
	}
	return check(msg.ProtoReflect(), "", 0)
}

func check(m protoreflect.Message, path string, depth int) error {
	if depth > Depth {
		return apierr.InvalidField(path, fmt.Sprintf("nests more than %d messages", Depth))
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := join(path, string(fd.Name()))
		switch {
		case fd.IsList():
			err = checkList(fd, v.List(), p, depth)
		case fd.IsMap():
			err = checkMap(fd, v.Map(), p, depth)
		default:
			err = checkValue(fd, v, p, depth)
		}
		return err == nil
	})
	return err
}

func checkList(fd protoreflect.FieldDescriptor, l protoreflect.List, p string, depth int) error {
	if l.Len() > Entries {
		return apierr.InvalidField(p, fmt.Sprintf("has %d entries; at most %d", l.Len(), Entries))
	}
	for i := range l.Len() {
		if err := checkValue(fd, l.Get(i), p+"["+strconv.Itoa(i)+"]", depth); err != nil {
			return err
		}
	}
	return nil
}

func checkMap(fd protoreflect.FieldDescriptor, m protoreflect.Map, p string, depth int) error {
	if m.Len() > MapItems {
		return apierr.InvalidField(p, fmt.Sprintf("has %d entries; at most %d", m.Len(), MapItems))
	}
	var err error
	m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		key := k.String()
		if len(key) > String {
			err = apierr.InvalidField(p, fmt.Sprintf("has a key of %d bytes; at most %d", len(key), String))
			return false
		}
		err = checkValue(fd.MapValue(), v, p+"["+key+"]", depth)
		return err == nil
	})
	return err
}

func checkValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, p string, depth int) error {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return checkLen(fd, len(v.String()), p)
	case protoreflect.BytesKind:
		return checkLen(fd, len(v.Bytes()), p)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return check(v.Message(), p, depth+1)
	case protoreflect.Int32Kind:
		// More than a List serves is documented as its largest page.
		if fd.Name() == "page_size" && v.Int() < 0 {
			return apierr.InvalidField(p, "must not be negative")
		}
	}
	return nil
}

func checkLen(fd protoreflect.FieldDescriptor, n int, p string) error {
	limit, ok := longer[fd.FullName()]
	if !ok {
		limit = String
	}
	if n > limit {
		return apierr.InvalidField(p, fmt.Sprintf("is %d bytes; at most %d", n, limit))
	}
	return nil
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
