package identity

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

func ruleID(name string) string { return strings.TrimPrefix(name, "accessRules/") }

func withRuleEtag(it etcdstore.Item[*identityv1.AccessRule]) *identityv1.AccessRule {
	r := it.Msg
	r.Etag = it.Etag
	return r
}

// accountWide says whether user holds a role on the whole account (the
// bootstrap administrator always does): such a user is never linked to an
// SSO sign-in by its email, as whoever controls that email at the provider
// would become an account administrator.
func (s *Server) accountWide(ctx context.Context, user string) (bool, error) {
	if user == BootstrapAdmin {
		return true, nil
	}
	all, _, err := s.rules.ListAll(ctx, "")
	if err != nil {
		return false, err
	}
	for _, it := range all {
		r := it.Msg
		if r.GetSubject().GetKind() == identityv1.SubjectKind_SUBJECT_KIND_USER && r.GetSubject().GetName() == user &&
			r.GetScope().GetKind() == identityv1.ScopeKind_SCOPE_KIND_ACCOUNT {
			return true, nil
		}
	}
	return false, nil
}

// CreateAccessRule grants a role to a subject on a scope.
func (s *Server) CreateAccessRule(ctx context.Context, req *identityv1.CreateAccessRuleRequest) (*identityv1.AccessRule, error) {
	in := req.GetAccessRule()
	id := req.GetAccessRuleId()
	if id == "" {
		id = "r-" + strings.ReplaceAll(newUID(), "-", "")[:16]
	} else if err := checkID("access_rule_id", id); err != nil {
		return nil, err
	}
	if err := s.checkSubject(ctx, in.GetSubject()); err != nil {
		return nil, err
	}
	role, ok := auth.LookupRole(in.GetRole())
	if !ok || !strings.HasPrefix(in.GetRole(), "roles/") || len(role.Scopes) == 0 {
		return nil, apierr.NotFound(apierr.Role, in.GetRole())
	}
	if err := s.checkScope(ctx, in.GetScope()); err != nil {
		return nil, err
	}
	if !role.Grantable(in.GetScope().GetKind()) {
		return nil, apierr.InvalidField("access_rule.scope.kind",
			fmt.Sprintf("%s may not be granted on a %s", in.GetRole(), in.GetScope().GetKind()))
	}
	all, _, err := s.rules.ListAll(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, r := range all {
		m := r.Msg
		if m.GetSubject().GetKind() == in.GetSubject().GetKind() && m.GetSubject().GetName() == in.GetSubject().GetName() &&
			m.GetRole() == in.GetRole() && m.GetScope().GetKind() == in.GetScope().GetKind() && m.GetScope().GetName() == in.GetScope().GetName() {
			return nil, apierr.AlreadyExists(apierr.AccessRule, m.GetName())
		}
	}
	c, _ := auth.CallerFrom(ctx)
	now := s.timestamp()
	rule := &identityv1.AccessRule{Name: "accessRules/" + id, Uid: newUID(), Subject: in.GetSubject(), Role: in.GetRole(),
		Scope: in.GetScope(), Creator: c.Principal, CreateTime: now, UpdateTime: now}
	it, err := s.rules.Create(ctx, id, rule)
	if err != nil {
		return nil, storeErr(err, apierr.AccessRule, rule.GetName())
	}
	return withRuleEtag(it), nil
}

// checkSubject: a user or application must exist; a group is any name.
func (s *Server) checkSubject(ctx context.Context, sub *identityv1.Subject) error {
	switch sub.GetKind() {
	case identityv1.SubjectKind_SUBJECT_KIND_USER:
		if _, err := s.getUser(ctx, sub.GetName()); err != nil {
			return err
		}
	case identityv1.SubjectKind_SUBJECT_KIND_APPLICATION:
		it, err := s.getApp(ctx, sub.GetName())
		if err != nil {
			return err
		}
		if userApp(it.Msg.GetApplication()) {
			return apierr.InvalidField("access_rule.subject.name",
				"a user application acts with its creator's access; grant roles to an application managed under Access")
		}
	case identityv1.SubjectKind_SUBJECT_KIND_GROUP:
		if strings.TrimSpace(sub.GetName()) == "" {
			return apierr.InvalidField("access_rule.subject.name", "must name the group")
		}
	default:
		return apierr.InvalidField("access_rule.subject.kind", "must be USER, GROUP or APPLICATION")
	}
	return nil
}

// checkScope: a department or project must exist (read from the quota
// service's keys, which any service may read).
func (s *Server) checkScope(ctx context.Context, sc *identityv1.Scope) error {
	var key string
	var r apierr.Resource
	switch sc.GetKind() {
	case identityv1.ScopeKind_SCOPE_KIND_ACCOUNT:
		if sc.GetName() != "" {
			return apierr.InvalidField("access_rule.scope.name", "must be empty for the account")
		}
		return nil
	case identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT:
		if !strings.HasPrefix(sc.GetName(), "departments/") {
			return apierr.InvalidField("access_rule.scope.name", "must be departments/{department}")
		}
		key, r = etcdstore.PrefixDepartments+strings.TrimPrefix(sc.GetName(), "departments/"), apierr.Department
	case identityv1.ScopeKind_SCOPE_KIND_PROJECT:
		if !strings.HasPrefix(sc.GetName(), "projects/") {
			return apierr.InvalidField("access_rule.scope.name", "must be projects/{project}")
		}
		key, r = etcdstore.PrefixProjects+strings.TrimPrefix(sc.GetName(), "projects/"), apierr.Project
	default:
		return apierr.InvalidField("access_rule.scope.kind", "must be ACCOUNT, DEPARTMENT or PROJECT")
	}
	resp, err := s.client.Get(ctx, key, clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	if resp.Count == 0 {
		return apierr.NotFound(r, sc.GetName())
	}
	return nil
}

// GetAccessRule returns a rule.
func (s *Server) GetAccessRule(ctx context.Context, req *identityv1.GetAccessRuleRequest) (*identityv1.AccessRule, error) {
	it, err := s.rules.Get(ctx, ruleID(req.GetName()))
	if err != nil {
		return nil, storeErr(err, apierr.AccessRule, req.GetName())
	}
	return withRuleEtag(it), nil
}

// ListAccessRules lists rules by name, with the documented filter.
func (s *Server) ListAccessRules(ctx context.Context, req *identityv1.ListAccessRulesRequest) (*identityv1.ListAccessRulesResponse, error) {
	f, err := parseFilter(req.GetFilter(), map[string]bool{"subject.kind": true, "subject.name": true, "role": true,
		"scope.kind": true, "scope.name": true})
	if err != nil {
		return nil, err
	}
	page, err := s.rules.List(ctx, "", etcdstore.PageSize(int(req.GetPageSize())), req.GetPageToken())
	if err != nil {
		return nil, listErr(err)
	}
	out := &identityv1.ListAccessRulesResponse{NextPageToken: page.NextPageToken}
	for _, it := range page.Items {
		r := it.Msg
		if f.matches(map[string][]string{
			"subject.kind": {strings.TrimPrefix(r.GetSubject().GetKind().String(), "SUBJECT_KIND_")},
			"subject.name": {r.GetSubject().GetName()}, "role": {r.GetRole()},
			"scope.kind": {strings.TrimPrefix(r.GetScope().GetKind().String(), "SCOPE_KIND_")},
			"scope.name": {r.GetScope().GetName()}}) {
			out.AccessRules = append(out.AccessRules, withRuleEtag(it))
		}
	}
	return out, nil
}

// DeleteAccessRule deletes a rule; there is no update.
func (s *Server) DeleteAccessRule(ctx context.Context, req *identityv1.DeleteAccessRuleRequest) (*emptypb.Empty, error) {
	if _, err := s.rules.Delete(ctx, ruleID(req.GetName()), req.GetEtag()); err != nil {
		return nil, storeErr(err, apierr.AccessRule, req.GetName())
	}
	return &emptypb.Empty{}, nil
}

// ListRoles lists the built-in roles: the permission table.
func (s *Server) ListRoles(context.Context, *identityv1.ListRolesRequest) (*identityv1.ListRolesResponse, error) {
	out := &identityv1.ListRolesResponse{}
	for _, r := range auth.Roles() {
		out.Roles = append(out.Roles, r.Proto())
	}
	return out, nil
}

// GetCaller says who the caller is and which rules apply to it.
func (s *Server) GetCaller(ctx context.Context, _ *identityv1.GetCallerRequest) (*identityv1.Caller, error) {
	c, ok := auth.CallerFrom(ctx)
	if !ok {
		return nil, apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_MISSING)
	}
	out := &identityv1.Caller{Principal: c.Principal, Groups: c.Groups, AccessRules: s.guard.Rules(c)}
	if !c.Expire.IsZero() {
		out.ExpireTime = timestamppb.New(c.Expire)
	}
	return out, nil
}
