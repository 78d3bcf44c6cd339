package auth

import (
	"strings"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
)

// Level is how wide a call's target is.
type Level int

// The levels. Anywhere is for things not inside any department (node pools,
// nodes, users, roles): a rule on any scope that grants the permission is
// enough, so a project's researcher can see the cluster's node pools.
const (
	AccountLevel Level = iota // only rules on the account
	DepartmentLevel
	ProjectLevel
	Anywhere
	// InDepartment is anything within the department: a rule on the
	// account, on the department or on one of its projects covers it (what
	// is usable in a department's projects is seen from them, and from
	// nowhere else).
	InDepartment
)

// Target is where a call acts: what a rule's scope must cover.
type Target struct {
	Level      Level
	Department string // departments/{d}, for DepartmentLevel and ProjectLevel (resolved)
	Project    string // projects/{p}, for ProjectLevel
	Resource   string // the resource named in errors and the audit log
}

// ProjectTarget is the target of project (projects/x) and resource in it.
func (g *Guard) ProjectTarget(project, resource string) Target {
	return Target{Level: ProjectLevel, Project: project, Department: g.DepartmentOf(project), Resource: resource}
}

// covers reports whether a rule's scope covers t.
func (g *Guard) covers(s *identityv1.Scope, t Target) bool {
	switch s.GetKind() {
	case identityv1.ScopeKind_SCOPE_KIND_ACCOUNT:
		return true
	case identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT:
		return t.Level == Anywhere || (t.Level == DepartmentLevel || t.Level == ProjectLevel || t.Level == InDepartment) &&
			t.Department == s.GetName()
	case identityv1.ScopeKind_SCOPE_KIND_PROJECT:
		return t.Level == Anywhere || t.Level == ProjectLevel && t.Project == s.GetName() ||
			t.Level == InDepartment && t.Department != "" && g.DepartmentOf(s.GetName()) == t.Department
	}
	return false
}

// Attrs are what conditional grants look at: who created the resource (and
// the uid of the user it acted for, where recorded: a user deleted and
// created again under the same name owns nothing of the first's) and
// whether it is an inference workload.
type Attrs struct {
	Creator    string
	CreatorUID string
	Inference  bool
}

// Allowed decides whether c holds p on t. attrs is called at most once, and
// only when the best grant is conditional (Own, Inference).
func (g *Guard) Allowed(c Caller, p Permission, t Target, attrs func() (Attrs, error)) (bool, error) {
	if project, ok := projectOfService(c.Principal); ok {
		r, _ := LookupRole(ProjectServiceRole)
		return r.Grant(p) == All && t.Level == ProjectLevel && t.Project == project, nil
	}
	if IsNodeAgent(c.Principal) {
		// A node agent's token sits on a node, beside tenants' code: it
		// opens its own pods' credentials (checkNodeAgent) and holds no
		// permission at all.
		return false, nil
	}
	if strings.HasPrefix(c.Principal, "services/") {
		r, _ := LookupRole(ServiceRole)
		return r.Grant(p) == All, nil
	}
	var conditional []Grant
	for _, rule := range g.rulesOf(c) {
		role, ok := LookupRole(rule.GetRole())
		if !ok || !role.Grantable(rule.GetScope().GetKind()) || !g.covers(rule.GetScope(), t) {
			continue
		}
		switch gr := role.Grant(p); gr {
		case All:
			return true, nil
		case Own, Inference:
			conditional = append(conditional, gr)
		}
	}
	if len(conditional) == 0 || attrs == nil {
		return false, nil
	}
	at, err := attrs()
	if err != nil {
		return false, err
	}
	for _, gr := range conditional {
		own := at.Creator != "" && (at.Creator == c.Principal || at.Creator == c.Creator) &&
			(at.CreatorUID == "" || at.CreatorUID == c.UserUID)
		if gr == Own && own || gr == Inference && at.Inference {
			return true, nil
		}
	}
	return false, nil
}

// holdsAny reports whether some rule of c grants p, even conditionally, on
// a scope that covers t.
func (g *Guard) holdsAny(c Caller, p Permission, t Target) bool {
	for _, rule := range g.rulesOf(c) {
		role, ok := LookupRole(rule.GetRole())
		if ok && role.Grantable(rule.GetScope().GetKind()) && g.covers(rule.GetScope(), t) && role.Grant(p) != None {
			return true
		}
	}
	return false
}

// keep is a List filter's question: may the caller view this item?
type keep func(t Target, at Attrs) bool

// viewFilter answers keep for c and permission p, without errors (the
// attributes of listed items are in the items).
func (g *Guard) viewFilter(c Caller, p Permission) keep {
	return func(t Target, at Attrs) bool {
		ok, _ := g.Allowed(c, p, t, func() (Attrs, error) { return at, nil })
		return ok
	}
}
