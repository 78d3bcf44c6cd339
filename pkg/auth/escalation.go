package auth

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Escalation: holding accessrules.create somewhere is not a licence to hand
// out more than one holds. A caller may grant (and delete a rule granting) a
// role only when it holds every permission of that role itself, at least as
// broadly (All covers Own and Inference), through rules whose scopes cover
// the rule's scope. A role that itself administers access (it may create or
// delete access rules) is appointed and removed from above: the caller's
// covering rule must be on a wider scope, so a department's administrator
// can neither appoint a peer nor remove the account's appointments on its
// department. The account has nothing above it; there, holding the role on
// the account is enough.

// administersAccess reports whether r may create or delete access rules.
func administersAccess(r *Role) bool {
	return r.Grant(perm(AccessRules, Create)) != None || r.Grant(perm(AccessRules, Delete)) != None
}

// wider reports whether scope s strictly contains the target t of a rule
// scope (an account rule contains a department and a project; a department
// rule contains its projects).
func wider(s *identityv1.Scope, t Target) bool {
	switch s.GetKind() {
	case identityv1.ScopeKind_SCOPE_KIND_ACCOUNT:
		return t.Level != AccountLevel
	case identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT:
		return t.Level == ProjectLevel && t.Department == s.GetName()
	}
	return false
}

// satisfies reports whether holding grant held is at least need.
func satisfies(held, need Grant) bool { return held == All || held == need && need != None }

// mayAdminister returns nil when c may create or delete a rule granting
// role on the scope of target t, else PERMISSION_DENIED naming the first
// permission c lacks there.
func (g *Guard) mayAdminister(c Caller, role *Role, t Target) error {
	if strings.HasPrefix(c.Principal, "services/") {
		return apierr.PermissionDenied(perm(AccessRules, Create).String(), t.Resource)
	}
	strict := administersAccess(role) && t.Level != AccountLevel
	rules := g.rulesOf(c)
	for _, e := range Entities {
		for _, act := range Actions {
			p := perm(e, act)
			need := role.Grant(p)
			if need == None {
				continue
			}
			held := false
			for _, rule := range rules {
				mine, ok := LookupRole(rule.GetRole())
				if !ok || !mine.Grantable(rule.GetScope().GetKind()) || !g.covers(rule.GetScope(), t) {
					continue
				}
				if strict && !wider(rule.GetScope(), t) {
					continue
				}
				if satisfies(mine.Grant(p), need) {
					held = true
					break
				}
			}
			if !held {
				return apierr.PermissionDenied(p.String(), t.Resource)
			}
		}
	}
	return nil
}

// checkGrant is CreateAccessRule's escalation check.
func checkGrant(_ context.Context, g *Guard, c Caller, req any) error {
	r := req.(*identityv1.CreateAccessRuleRequest).GetAccessRule()
	role, ok := LookupRole(r.GetRole())
	if !ok {
		return nil // the handler answers NOT_FOUND
	}
	return g.mayAdminister(c, role, g.ruleTarget(r))
}

// checkRevoke is DeleteAccessRule's: the rule is read from etcd, not the
// mirror, so a rule created a moment ago is judged by its role too.
func checkRevoke(ctx context.Context, g *Guard, c Caller, req any) error {
	id := strings.TrimPrefix(named(req), "accessRules/")
	resp, err := g.client.Get(ctx, etcdstore.PrefixAccessRules+id)
	if err != nil {
		return fmt.Errorf("read access rule %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return nil // NOT_FOUND from the handler
	}
	r := &identityv1.AccessRule{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, r); err != nil {
		return fmt.Errorf("decode access rule %s: %w", id, err)
	}
	role, ok := LookupRole(r.GetRole())
	if !ok {
		return nil
	}
	t := g.ruleTarget(r)
	// The permission check ran on the mirror's copy; judge the scope of the
	// stored one as well.
	if ok, _ := g.Allowed(c, perm(AccessRules, Delete), t, nil); !ok {
		return apierr.PermissionDenied(perm(AccessRules, Delete).String(), t.Resource)
	}
	return g.mayAdminister(c, role, t)
}

// touches reports whether an update with mask changes field of the request's
// resource: named in the mask (or "*"), or, with an empty mask, set to a
// non-default value (AIP-134 as services/quota applies it).
func touches(mask *fieldmaskpb.FieldMask, field string, set bool) bool {
	if len(mask.GetPaths()) == 0 {
		return set
	}
	for _, p := range mask.GetPaths() {
		if p == "*" || p == field {
			return true
		}
	}
	return false
}

// stored reads one resource of the quota service from etcd.
func stored[T proto.Message](ctx context.Context, g *Guard, key string, msg T) (bool, error) {
	resp, err := g.client.Get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	return true, proto.Unmarshal(resp.Kvs[0].Value, msg)
}

func messagesEqual[T proto.Message](x, y []T) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !proto.Equal(x[i], y[i]) {
			return false
		}
	}
	return true
}

// withoutSetters is rules with set_by cleared: a request's set_by is
// ignored (the service records it), so it is no change.
func withoutSetters(rules []*quotav1.SchedulingRules) []*quotav1.SchedulingRules {
	out := make([]*quotav1.SchedulingRules, len(rules))
	for i, r := range rules {
		out[i] = proto.Clone(r).(*quotav1.SchedulingRules)
		out[i].SetBy = ""
	}
	return out
}

// checkDepartmentQuota: a department's quota and its scheduling rules are
// set by who holds departments.edit above it, the account: they bound the
// department's own administrator, who edits the rest (its description) but
// neither what it is given nor the rules it is held to.
func checkDepartmentQuota(ctx context.Context, g *Guard, c Caller, req any) error {
	r := req.(*quotav1.UpdateDepartmentRequest)
	in := r.GetDepartment()
	quotas := touches(r.GetUpdateMask(), "node_pool_quotas", len(in.GetNodePoolQuotas()) > 0)
	rules := touches(r.GetUpdateMask(), "scheduling_rules", len(in.GetSchedulingRules()) > 0)
	if !quotas && !rules {
		return nil
	}
	cur := &quotav1.Department{}
	found, err := stored(ctx, g, etcdstore.PrefixDepartments+strings.TrimPrefix(in.GetName(), "departments/"), cur)
	if err != nil || !found {
		return err
	}
	if ok, _ := g.Allowed(c, perm(Departments, Edit), account(in.GetName()), nil); ok {
		return nil
	}
	denied := apierr.PermissionDenied(perm(Departments, Edit).String(), "account")
	switch {
	case quotas && !messagesEqual(cur.GetNodePoolQuotas(), in.GetNodePoolQuotas()):
		return denied.InField("department.node_pool_quotas")
	case rules && !messagesEqual(withoutSetters(cur.GetSchedulingRules()), withoutSetters(in.GetSchedulingRules())):
		return denied.InField("department.scheduling_rules")
	}
	return nil
}

// checkProjectMove: moving a project into another department needs
// projects.create in that department, as creating it there would.
func checkProjectMove(ctx context.Context, g *Guard, c Caller, req any) error {
	r := req.(*quotav1.UpdateProjectRequest)
	in := r.GetProject()
	if !touches(r.GetUpdateMask(), "department", in.GetDepartment() != "") {
		return nil
	}
	to := in.GetDepartment()
	if to == "" {
		to = "departments/default"
	}
	if to == g.DepartmentOf(in.GetName()) {
		return nil
	}
	t := Target{Level: DepartmentLevel, Department: to, Resource: to}
	if ok, _ := g.Allowed(c, perm(Projects, Create), t, nil); !ok {
		return apierr.PermissionDenied(perm(Projects, Create).String(), to).InField("project.department")
	}
	return nil
}
