package auth

import (
	"slices"
	"strings"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
)

// Entity is a kind of thing a permission is about.
type Entity string

// The entities of the permission table.
const (
	Departments  Entity = "departments"
	Projects     Entity = "projects"
	NodePools    Entity = "nodepools"
	Nodes        Entity = "nodes"
	Workloads    Entity = "workloads"
	Users        Entity = "users"
	Applications Entity = "applications"
	AccessRules  Entity = "accessrules"
	Policies     Entity = "policies"
	Audit        Entity = "audit"
	// Settings are the account's general settings: every role sees them,
	// only a system administrator changes them.
	Settings Entity = "settings"
)

// Entities lists the table's rows in order.
var Entities = []Entity{Departments, Projects, NodePools, Nodes, Workloads, Users, Applications, AccessRules, Policies, Audit, Settings}

// Action is what is done to an entity.
type Action string

// The actions of the permission table.
const (
	View   Action = "view"
	Create Action = "create"
	Edit   Action = "edit"
	Delete Action = "delete"
)

// Actions lists the table's columns in order.
var Actions = []Action{View, Create, Edit, Delete}

// Permission is one cell of the table, written `<entity>.<action>`.
type Permission struct {
	Entity Entity
	Action Action
}

func (p Permission) String() string { return string(p.Entity) + "." + string(p.Action) }

// Grant is what a role holds for one permission.
type Grant int

// The grants. Own and Inference are conditional: on the resources the
// caller created, or on inference workloads only.
const (
	None Grant = iota
	All
	Own
	Inference
)

// Role is one built-in role: a row per entity of the grants for view,
// create, edit, delete.
type Role struct {
	ID          string
	DisplayName string
	Description string
	// Scopes are where the role may be granted; empty means nowhere (the
	// internal service role).
	Scopes []identityv1.ScopeKind
	Table  map[Entity][4]Grant
}

// Grant is what the role holds for p.
func (r *Role) Grant(p Permission) Grant {
	row, ok := r.Table[p.Entity]
	if !ok {
		return None
	}
	return row[slices.Index(Actions, p.Action)]
}

// Grantable reports whether the role may be granted on scope kind k.
func (r *Role) Grantable(k identityv1.ScopeKind) bool { return slices.Contains(r.Scopes, k) }

// Short names keep the table readable: one row is view, create, edit, delete.
const (
	n = None
	a = All
	o = Own
	i = Inference
)

var (
	onAccount    = identityv1.ScopeKind_SCOPE_KIND_ACCOUNT
	onDepartment = identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT
	onProject    = identityv1.ScopeKind_SCOPE_KIND_PROJECT
)

// ServiceRole is the role of the control plane's own services when they call
// each other; it cannot be granted by an access rule.
const ServiceRole = "service"

// ProjectServiceRole is the role of a service acting for one project
// (ProjectCredentials): what it grants holds in that project only.
const ProjectServiceRole = "project-service"

// roles is THE permission table. Every decision of the interceptor, the
// generated matrix test and `runway role list` read it.
var roles = []*Role{
	{ID: "system-admin", DisplayName: "System administrator", Description: "Everything, everywhere.",
		Scopes: []identityv1.ScopeKind{onAccount},
		Table: map[Entity][4]Grant{
			Departments: {a, a, a, a}, Projects: {a, a, a, a}, NodePools: {a, a, a, a}, Nodes: {a, a, a, a},
			Workloads: {a, a, a, a}, Users: {a, a, a, a}, Applications: {a, a, a, a}, AccessRules: {a, a, a, a},
			Policies: {a, a, a, a}, Audit: {a, n, n, n}, Settings: {a, a, a, a}}},
	{ID: "department-admin", DisplayName: "Department administrator",
		Description: "Runs departments: their projects, workloads, policies and who has access to them.",
		Scopes:      []identityv1.ScopeKind{onAccount, onDepartment},
		Table: map[Entity][4]Grant{
			Departments: {a, n, a, n}, Projects: {a, a, a, a}, NodePools: {a, n, n, n}, Nodes: {a, n, n, n},
			Workloads: {a, a, a, a}, Users: {a, n, n, n}, Applications: {o, o, o, o}, AccessRules: {a, a, n, a},
			Policies: {a, a, a, a}, Audit: {a, n, n, n}, Settings: {a, n, n, n}}},
	{ID: "editor", DisplayName: "Editor",
		Description: "Manages the organisation (departments, projects, node pools, policies), not its workloads or access.",
		Scopes:      []identityv1.ScopeKind{onAccount, onDepartment},
		Table: map[Entity][4]Grant{
			Departments: {a, a, a, a}, Projects: {a, a, a, a}, NodePools: {a, a, a, a}, Nodes: {a, n, n, n},
			Workloads: {a, n, n, n}, Users: {a, n, n, n}, Applications: {o, o, o, o}, AccessRules: {a, n, n, n},
			Policies: {a, a, a, a}, Audit: {n, n, n, n}, Settings: {a, n, n, n}}},
	{ID: "research-manager", DisplayName: "Research manager",
		Description: "Manages every workload of its projects and sees their set-up.",
		Scopes:      []identityv1.ScopeKind{onAccount, onDepartment, onProject},
		Table: map[Entity][4]Grant{
			Departments: {a, n, n, n}, Projects: {a, n, n, n}, NodePools: {a, n, n, n}, Nodes: {a, n, n, n},
			Workloads: {a, a, a, a}, Users: {n, n, n, n}, Applications: {o, o, o, o}, AccessRules: {a, n, n, n},
			Policies: {a, n, n, n}, Audit: {n, n, n, n}, Settings: {a, n, n, n}}},
	{ID: "l1-researcher", DisplayName: "L1 researcher",
		Description: "Submits workloads and changes or deletes only its own; sees the others of its projects.",
		Scopes:      []identityv1.ScopeKind{onAccount, onDepartment, onProject},
		Table: map[Entity][4]Grant{
			Departments: {n, n, n, n}, Projects: {a, n, n, n}, NodePools: {a, n, n, n}, Nodes: {a, n, n, n},
			Workloads: {a, a, o, o}, Users: {n, n, n, n}, Applications: {o, o, o, o}, AccessRules: {n, n, n, n},
			Policies: {a, n, n, n}, Audit: {n, n, n, n}, Settings: {a, n, n, n}}},
	{ID: "l2-researcher", DisplayName: "L2 researcher",
		Description: "Submits, changes and deletes any workload of its projects.",
		Scopes:      []identityv1.ScopeKind{onAccount, onDepartment, onProject},
		Table: map[Entity][4]Grant{
			Departments: {n, n, n, n}, Projects: {a, n, n, n}, NodePools: {a, n, n, n}, Nodes: {a, n, n, n},
			Workloads: {a, a, a, a}, Users: {n, n, n, n}, Applications: {o, o, o, o}, AccessRules: {n, n, n, n},
			Policies: {a, n, n, n}, Audit: {n, n, n, n}, Settings: {a, n, n, n}}},
	{ID: "ml-engineer", DisplayName: "ML engineer",
		Description: "Deploys and manages inference workloads; sees the others.",
		Scopes:      []identityv1.ScopeKind{onAccount, onDepartment, onProject},
		Table: map[Entity][4]Grant{
			Departments: {n, n, n, n}, Projects: {a, n, n, n}, NodePools: {a, n, n, n}, Nodes: {a, n, n, n},
			Workloads: {a, i, i, i}, Users: {n, n, n, n}, Applications: {o, o, o, o}, AccessRules: {n, n, n, n},
			Policies: {a, n, n, n}, Audit: {n, n, n, n}, Settings: {a, n, n, n}}},
	{ID: "viewer", DisplayName: "Viewer", Description: "Sees everything in its scope and changes nothing.",
		Scopes: []identityv1.ScopeKind{onAccount, onDepartment, onProject},
		Table: map[Entity][4]Grant{
			Departments: {a, n, n, n}, Projects: {a, n, n, n}, NodePools: {a, n, n, n}, Nodes: {a, n, n, n},
			Workloads: {a, n, n, n}, Users: {n, n, n, n}, Applications: {n, n, n, n}, AccessRules: {n, n, n, n},
			Policies: {a, n, n, n}, Audit: {n, n, n, n}, Settings: {a, n, n, n}}},
	// The control plane's services: they read what they check (the workload
	// service reads projects) and node agents report on nodes. They create
	// and delete no workload: the Kubernetes runtime does that for one
	// project at a time, as ProjectServiceRole.
	{ID: ServiceRole, DisplayName: "Runway service", Description: "The control plane's own services calling each other; not grantable.",
		Table: map[Entity][4]Grant{
			Departments: {a, n, n, n}, Projects: {a, n, n, n}, NodePools: {a, n, n, n}, Nodes: {a, n, a, n},
			Workloads: {a, n, n, n}, Settings: {a, n, n, n}}},
	// The Kubernetes runtime acting for one project's namespace
	// (services/{name}/projects/{p}): it turns the runway pods users create
	// there into that project's workloads and deletes them with their pods,
	// in that project only.
	{ID: ProjectServiceRole, DisplayName: "Runway service for one project", Description: "A control-plane service acting for one project (the Kubernetes runtime for the project's namespace); not grantable.",
		Table: map[Entity][4]Grant{Projects: {a, n, n, n}, Workloads: {a, a, n, a}}},
}

var roleByID = func() map[string]*Role {
	m := map[string]*Role{}
	for _, r := range roles {
		m[r.ID] = r
	}
	return m
}()

// LookupRole returns the role with id ("l1-researcher") or name
// ("roles/l1-researcher").
func LookupRole(idOrName string) (*Role, bool) {
	r, ok := roleByID[strings.TrimPrefix(idOrName, "roles/")]
	return r, ok
}

// Roles lists the grantable roles, ordered by id.
func Roles() []*Role {
	var out []*Role
	for _, r := range roles {
		if len(r.Scopes) > 0 {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(x, y *Role) int { return strings.Compare(x.ID, y.ID) })
	return out
}

// Proto is the role as the API shows it.
func (r *Role) Proto() *identityv1.Role {
	out := &identityv1.Role{Name: "roles/" + r.ID, DisplayName: r.DisplayName, Description: r.Description,
		AllowedScopes: slices.Clone(r.Scopes)}
	for _, e := range Entities {
		for _, act := range Actions {
			p := Permission{e, act}
			switch r.Grant(p) {
			case All:
				out.Permissions = append(out.Permissions, p.String())
			case Own:
				out.OwnPermissions = append(out.OwnPermissions, p.String())
			case Inference:
				out.InferencePermissions = append(out.InferencePermissions, p.String())
			}
		}
	}
	slices.Sort(out.Permissions)
	slices.Sort(out.OwnPermissions)
	slices.Sort(out.InferencePermissions)
	return out
}
