package auth

import (
	"context"
	"strings"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
)

// Setters: a rule or policy the account or a department sets on a scope
// below it (a project's scheduling rules, a department's policy) records
// the scope it was set from, and only a caller acting from that scope or a
// wider one may change or remove it. The permission table alone cannot say
// so: a department's administrator holds projects.edit and policies.edit on
// every project of its department, whoever set what is there. The guard
// puts on every mutating call the widest scope through which the caller
// holds the call's permission on its target (ActingScope); the service that
// stores the rule compares it with the stored setter (Covers) on the same
// read it conditions its write on.

// AccountScope names the account as a setter (`set_by` fields).
const AccountScope = "account"

type actingKey struct{}

// withActingScope returns ctx carrying the scope a mutating call acts from.
func withActingScope(ctx context.Context, scope string) context.Context {
	return context.WithValue(ctx, actingKey{}, scope)
}

// ActingScope is the widest scope through which the caller holds the call's
// permission on its target: AccountScope, `departments/{d}` or
// `projects/{p}`. A call that came through no guard (an in-process call, a
// deployment without authentication) acts from the account.
func ActingScope(ctx context.Context) string {
	if s, ok := ctx.Value(actingKey{}).(string); ok {
		return s // "" (no rule of the caller's grants it) covers nothing
	}
	return AccountScope
}

// actingScope is ActingScope's value for c, p and t. A control-plane
// service acts from the account; one acting for a project, from it.
func (g *Guard) actingScope(c Caller, p Permission, t Target) string {
	if project, ok := projectOfService(c.Principal); ok {
		return project
	}
	if strings.HasPrefix(c.Principal, "services/") && !IsNodeAgent(c.Principal) {
		return AccountScope
	}
	widest := ""
	for _, rule := range g.rulesOf(c) {
		role, ok := LookupRole(rule.GetRole())
		s := rule.GetScope()
		if !ok || !role.Grantable(s.GetKind()) || !g.covers(s, t) || role.Grant(p) == None {
			continue
		}
		switch s.GetKind() {
		case identityv1.ScopeKind_SCOPE_KIND_ACCOUNT:
			return AccountScope
		case identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT:
			widest = s.GetName()
		case identityv1.ScopeKind_SCOPE_KIND_PROJECT:
			if widest == "" {
				widest = s.GetName()
			}
		}
	}
	return widest
}

// Covers reports whether a caller acting from scope acting may change what
// was set from scope setBy: setBy is acting or lies within it. department
// is the department of setBy when setBy is a project. An empty setBy (a
// rule stored before setters were recorded) is the account's.
func Covers(acting, setBy, department string) bool {
	if setBy == "" {
		setBy = AccountScope
	}
	switch {
	case acting == AccountScope || acting == setBy:
		return true
	case strings.HasPrefix(acting, "departments/"):
		return strings.HasPrefix(setBy, "projects/") && department == acting
	}
	return false
}
