package quota

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/runwayhq/runway/pkg/apierr"
)

// fieldRules says which update_mask paths a resource accepts.
//
// AIP-134 as the proto comments specify it: an empty mask means every
// mutable field the request sets to a non-default value; "*" means every
// mutable field; a named field that the request leaves unset is reset to its
// default. `name` and `etag` select and condition the update and are
// ignored in the mask. Output-only fields are rejected with IMMUTABLE_FIELD,
// except when the value sent is the stored one: the REST gateway derives the
// mask from the JSON body, so a resource read with GET and sent back whole
// with PATCH names them, and that must work.
type fieldRules struct {
	mutable    []string // top-level fields, and sub-fields of singular messages ("time_slicing.mode")
	outputOnly []string
}

var (
	nodePoolFields = fieldRules{
		mutable: []string{"description", "node_selector", "placement_strategy", "time_slicing",
			"time_slicing.mode", "time_slicing.lease_duration", "time_slicing.precision_percent",
			"time_based_fair_share", "time_based_fair_share.half_life", "time_based_fair_share.k", "tolerations"},
		outputOnly: []string{"uid", "create_time", "update_time"},
	}
	departmentFields = fieldRules{
		mutable:    []string{"description", "node_pool_quotas", "scheduling_rules"},
		outputOnly: []string{"uid", "create_time", "update_time"},
	}
	projectFields = fieldRules{
		mutable:    []string{"description", "department", "node_pool_quotas", "default_node_pools", "scheduling_rules"},
		outputOnly: []string{"uid", "create_time", "update_time"},
	}
	settingsFields = fieldRules{
		mutable: []string{"reject_over_subscription", "default_node_pool", "allow_over_quota_by_default",
			"workspace_auto_suspend", "gpu_resource_optimization", "login_banner"},
		outputOnly: []string{"uid", "create_time", "update_time"},
	}
)

// ignoredPaths select or condition an update rather than change it.
var ignoredPaths = []string{"name", "etag"}

// resolveMask returns the paths to copy from the request's resource `in` onto
// the stored one, or IMMUTABLE_FIELD for a path that may not be updated.
func resolveMask(mask *fieldmaskpb.FieldMask, in, stored proto.Message, rules fieldRules) ([]string, error) {
	paths := mask.GetPaths()
	if len(paths) == 0 {
		var set []string
		msg := in.ProtoReflect()
		for _, p := range rules.mutable {
			if !strings.Contains(p, ".") && msg.Has(msg.Descriptor().Fields().ByName(protoreflect.Name(p))) {
				set = append(set, p)
			}
		}
		return set, nil
	}
	if slices.Contains(paths, "*") {
		var all []string
		for _, p := range rules.mutable {
			if !strings.Contains(p, ".") {
				all = append(all, p)
			}
		}
		return all, nil
	}
	var out []string
	for _, p := range paths {
		switch {
		case slices.Contains(ignoredPaths, p):
		case slices.Contains(rules.mutable, p):
			out = append(out, p)
		case slices.Contains(rules.outputOnly, p) && sameField(in, stored, p):
		default:
			return nil, apierr.ImmutableField(p)
		}
	}
	return out, nil
}

// sameField reports whether the top-level field p has the same value in a
// and b (both unset counts as the same).
func sameField(a, b proto.Message, p string) bool {
	ma, mb := a.ProtoReflect(), b.ProtoReflect()
	fd := ma.Descriptor().Fields().ByName(protoreflect.Name(p))
	if ma.Has(fd) != mb.Has(fd) {
		return false
	}
	return !ma.Has(fd) || ma.Get(fd).Equal(mb.Get(fd))
}

// applyMask copies each path from src onto dst; a path src leaves unset is
// cleared on dst (reset to its default, which the fill* functions then set).
// src must not be used afterwards: values are shared, not copied.
func applyMask(dst, src proto.Message, paths []string) {
	for _, p := range paths {
		applyPath(dst.ProtoReflect(), src.ProtoReflect(), strings.Split(p, "."))
	}
}

func applyPath(dst, src protoreflect.Message, path []string) {
	fd := dst.Descriptor().Fields().ByName(protoreflect.Name(path[0]))
	has := src != nil && src.IsValid() && src.Has(fd)
	if len(path) == 1 {
		if has {
			dst.Set(fd, src.Get(fd))
		} else {
			dst.Clear(fd)
		}
		return
	}
	var sub protoreflect.Message
	if has {
		sub = src.Get(fd).Message()
	}
	applyPath(dst.Mutable(fd).Message(), sub, path[1:])
}
