package quota

import (
	"context"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Node pools, departments and projects share one create/update/delete flow;
// what differs between them is gathered in a resourceKind, so each resource
// file holds only its own rules and the flow is written (and fixed) once.

// resource is what the flow reads of a stored resource; the generated
// getters are nil-safe, so a request without the resource reads as empty.
type resource interface {
	proto.Message
	GetName() string
	GetEtag() string
	GetUpdateTime() *timestamppb.Timestamp
}

// resourceKind describes one kind of resource to the shared flow.
type resourceKind[T resource] struct {
	collection string // first part of a name: "departments"
	field      string // request field holding the resource: "department"
	idField    string // request field of a create's id: "department_id"
	resource   apierr.Resource
	fields     fieldRules
	// items is a function, not a collection, because the kinds are package
	// values and the collections belong to each Server's store.
	items func(*store) *etcdstore.Collection[T]
	fill  func(T)
	check func(v *violations, field string, msg T, id string)
	// prepare checks and conditions c on what a write depends on beyond the
	// resource itself; before is nil on a create. nil: nothing to check.
	prepare func(s *Server, ctx context.Context, c *change, before, after T) error
	// setters stamps the scope each rule of after was set from and refuses
	// a change to one set from a scope the caller does not act from
	// (setby.go); before is nil on a create. nil: the kind has no rules.
	setters func(ctx context.Context, before, after T) error
	// builtIn is the error for deleting the built-in resource; nil when the
	// kind has none.
	builtIn func(name string) error
	// inUse checks, and conditions c on, what must be gone before a delete.
	inUse func(s *Server, ctx context.Context, c *change, name, id string) error
}

// get returns one resource by name.
func (k *resourceKind[T]) get(ctx context.Context, s *Server, name string) (T, error) {
	var zero T
	id, err := parseName("name", name, k.collection)
	if err != nil {
		return zero, err
	}
	it, err := k.items(s.store).Get(ctx, id)
	if err != nil {
		return zero, storeErr(err, k.resource, name)
	}
	return fromItem(it), nil
}

// list returns a page of resources in name order and the next page's token.
func (k *resourceKind[T]) list(ctx context.Context, s *Server, size int32, token string) ([]T, string, error) {
	if err := checkPageSize(size); err != nil {
		return nil, "", err
	}
	page, err := k.items(s.store).List(ctx, "", int(size), token)
	if err != nil {
		return nil, "", storeErr(err, k.resource, "")
	}
	var out []T // nil when empty, as the responses had it before
	for _, it := range page.Items {
		out = append(out, fromItem(it))
	}
	return out, page.NextPageToken, nil
}

// build turns a create request into the resource to store: output-only
// fields set, defaults filled, and every violation of the request reported
// at once (the resource is checked only when it was sent).
func (k *resourceKind[T]) build(s *Server, id string, in T) (T, error) {
	var v violations
	v.checkID(k.idField, id)
	sent := in.ProtoReflect().IsValid()
	v.checkRequired(k.field, !sent)
	msg := in.ProtoReflect().Type().New().Interface().(T)
	if sent {
		msg = proto.Clone(in).(T)
	}
	now := s.timestamp()
	stamp(msg, k.collection+"/"+id, newUID(), now, now)
	k.fill(msg)
	if sent {
		k.check(&v, k.field, msg, id)
	}
	return msg, v.err()
}

// create builds the resource of a create request and commits it in one
// change with what prepare conditions it on, failing with ALREADY_EXISTS when
// its name is taken.
func (k *resourceKind[T]) create(ctx context.Context, s *Server, id string, in T) (T, error) {
	var out, none T
	msg, err := k.build(s, id, in)
	if err != nil {
		return out, err
	}
	if err := k.stampSetters(ctx, none, msg); err != nil {
		return out, err
	}
	key := k.items(s.store).Key(id)
	err = retry(msg.GetName(), func() error {
		if err := s.absent(ctx, key, k.resource, msg.GetName()); err != nil {
			return err
		}
		c := &change{}
		if err := k.conditions(ctx, s, c, none, msg); err != nil {
			return err
		}
		c.put(key, msg, 0)
		rev, err := s.store.commit(ctx, c)
		if err != nil {
			return storeErr(err, k.resource, msg.GetName())
		}
		out = withEtag(proto.Clone(msg).(T), rev)
		return nil
	})
	return out, err
}

// update changes the fields of mask, re-reading on a concurrent write.
func (k *resourceKind[T]) update(ctx context.Context, s *Server, in T, mask *fieldmaskpb.FieldMask) (T, error) {
	var out T
	var v violations
	sent := in.ProtoReflect().IsValid()
	v.checkRequired(k.field, !sent)
	id := ""
	if sent {
		id = v.checkName(k.field+".name", in.GetName(), k.collection)
	}
	if err := v.err(); err != nil {
		return out, err
	}
	err := retry(in.GetName(), func() (err error) {
		out, err = k.updateOnce(ctx, s, id, in, mask)
		return err
	})
	return out, err
}

// updateOnce is one attempt of update: read, merge, check, commit.
func (k *resourceKind[T]) updateOnce(ctx context.Context, s *Server, id string, in T, mask *fieldmaskpb.FieldMask) (T, error) {
	var zero T
	cur, err := k.items(s.store).Get(ctx, id)
	if err != nil {
		return zero, storeErr(err, k.resource, in.GetName())
	}
	next, err := k.merge(cur, in, id, mask)
	if err != nil {
		return zero, err
	}
	if err := k.stampSetters(ctx, cur.Msg, next); err != nil {
		return zero, err
	}
	if unchanged(cur.Msg, next, cur.Msg.GetUpdateTime()) {
		return fromItem(cur), nil
	}
	setTime(next, "update_time", s.timestamp())
	c := &change{}
	if err := k.conditions(ctx, s, c, cur.Msg, next); err != nil {
		return zero, err
	}
	c.put(k.items(s.store).Key(id), next, cur.Revision)
	rev, err := s.store.commit(ctx, c)
	if err != nil {
		return zero, storeErr(err, k.resource, in.GetName())
	}
	return withEtag(next, rev), nil
}

// conditions runs prepare, when the kind has one.
func (k *resourceKind[T]) conditions(ctx context.Context, s *Server, c *change, before, after T) error {
	if k.prepare == nil {
		return nil
	}
	return k.prepare(s, ctx, c, before, after)
}

// stampSetters runs setters, when the kind has one.
func (k *resourceKind[T]) stampSetters(ctx context.Context, before, after T) error {
	if k.setters == nil {
		return nil
	}
	return k.setters(ctx, before, after)
}

// merge checks the caller's etag and returns cur with the masked fields of
// in applied, defaults filled and checked.
func (k *resourceKind[T]) merge(cur etcdstore.Item[T], in T, id string, mask *fieldmaskpb.FieldMask) (T, error) {
	var zero T
	if err := checkEtag(in.GetName(), in.GetEtag(), cur.Etag); err != nil {
		return zero, err
	}
	paths, err := resolveMask(mask, in, cur.Msg, k.fields)
	if err != nil {
		return zero, err
	}
	next := proto.Clone(cur.Msg).(T)
	applyMask(next, proto.Clone(in), paths)
	k.fill(next)
	var v violations
	if k.check(&v, k.field, next, id); len(v) > 0 {
		return zero, v.err()
	}
	return next, nil
}

// delete removes a resource once inUse finds nothing that still needs it.
func (k *resourceKind[T]) delete(ctx context.Context, s *Server, name, etag string) (*emptypb.Empty, error) {
	id, err := parseName("name", name, k.collection)
	if err != nil {
		return nil, err
	}
	if id == builtInID && k.builtIn != nil {
		return nil, k.builtIn(name)
	}
	err = retry(name, func() error {
		cur, err := k.items(s.store).Get(ctx, id)
		if err != nil {
			return storeErr(err, k.resource, name)
		}
		if err := checkEtag(name, etag, cur.Etag); err != nil {
			return err
		}
		// A delete removes every rule: it too needs the scope that set them.
		var none T
		if err := k.stampSetters(ctx, cur.Msg, none); err != nil {
			setBy := apierr.Info(err).GetMetadata()["setBy"]
			if setBy == "" {
				return err
			}
			return apierr.PermissionDenied(k.collection+".delete", setBy).InField("name").With("setBy", setBy)
		}
		c := &change{}
		if err := k.inUse(s, ctx, c, name, id); err != nil {
			return err
		}
		c.del(k.items(s.store).Key(id), cur.Revision)
		_, err = s.store.commit(ctx, c)
		return storeErr(err, k.resource, name)
	})
	if err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// readAll reads every resource of a collection and guards c on its prefix,
// so that the change commits only if none was created or changed since: the
// decisions made on what was read (a count, a sum, a reference) still hold.
func readAll[T proto.Message](ctx context.Context, items *etcdstore.Collection[T], c *change, r apierr.Resource) ([]T, error) {
	its, rev, err := items.ListAll(ctx, "")
	if err != nil {
		return nil, storeErr(err, r, "")
	}
	c.unchangedSince(items.Prefix(), rev)
	out := make([]T, len(its))
	for i, it := range its {
		out[i] = it.Msg
	}
	return out, nil
}

// stamp sets the output-only fields of a new resource and clears its etag
// (never stored). Reflection, because the generated types share the field
// names but no setters.
func stamp(msg proto.Message, name, uid string, create, update *timestamppb.Timestamp) {
	m := msg.ProtoReflect()
	fields := m.Descriptor().Fields()
	m.Set(fields.ByName("name"), protoreflect.ValueOfString(name))
	m.Set(fields.ByName("uid"), protoreflect.ValueOfString(uid))
	setTime(msg, "create_time", create)
	setTime(msg, "update_time", update)
	setEtag(msg, "")
}

// setTime sets the timestamp field named field of msg.
func setTime(msg proto.Message, field protoreflect.Name, ts *timestamppb.Timestamp) {
	m := msg.ProtoReflect()
	m.Set(m.Descriptor().Fields().ByName(field), protoreflect.ValueOfMessage(ts.ProtoReflect()))
}
