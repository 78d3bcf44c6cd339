package quota

import (
	"cmp"
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
)

// Who set a scheduling rule: each entry records the scope it was set from
// (SchedulingRules.set_by, pkg/auth's ActingScope of the write), and an
// entry set from a wider scope (the account's on a department or project, a
// department's on a project) is changed or removed only from there. The
// check runs on the same read the write is conditioned on, so a rule the
// account sets meanwhile is not overwritten from below.

// rulesSetters stamps the rules a write leaves (after; before is the stored
// resource, nil on a create): an entry sent back unchanged keeps its setter,
// a new or changed one gets the caller's scope. It fails with
// PERMISSION_DENIED, naming the setter's scope, when the write changes or
// removes an entry the caller's scope does not cover. department is the
// department of the rules' project ("" for a department's rules).
func rulesSetters(ctx context.Context, field, permission string, before, after []*quotav1.SchedulingRules, department string) error {
	acting := auth.ActingScope(ctx)
	prev := map[string]*quotav1.SchedulingRules{}
	for _, r := range before {
		prev[r.GetWorkloadType().String()] = r
	}
	for i, r := range after {
		typ := r.GetWorkloadType().String()
		old, ok := prev[typ]
		delete(prev, typ)
		switch {
		case ok && sameRule(old, r):
			r.SetBy = cmp.Or(old.GetSetBy(), auth.AccountScope)
			continue
		case ok && !auth.Covers(acting, old.GetSetBy(), department):
			return setAbove(fmt.Sprintf("%s[%d]", field, i), permission, old)
		}
		r.SetBy = acting
	}
	for _, old := range before {
		if _, removed := prev[old.GetWorkloadType().String()]; removed && !auth.Covers(acting, old.GetSetBy(), department) {
			return setAbove(field, permission, old)
		}
	}
	return nil
}

// sameRule reports whether two entries say the same, whoever set them.
func sameRule(x, y *quotav1.SchedulingRules) bool {
	x, y = proto.Clone(x).(*quotav1.SchedulingRules), proto.Clone(y).(*quotav1.SchedulingRules)
	x.SetBy, y.SetBy = "", ""
	return proto.Equal(x, y)
}

// setAbove is the refusal of a change to an entry set from a scope the
// caller does not act from: PERMISSION_DENIED for permission on that scope.
func setAbove(field, permission string, old *quotav1.SchedulingRules) error {
	scope := cmp.Or(old.GetSetBy(), auth.AccountScope)
	return apierr.PermissionDenied(permission, scope).InField(field).
		With("setBy", scope).With("workloadType", old.GetWorkloadType().String())
}
