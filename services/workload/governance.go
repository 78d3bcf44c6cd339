package workload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/policy"
)

// Governance implements workloadv1.GovernanceServiceServer: policies,
// environments, compute resources and templates, stored under their own prefixes and
// read by CreateWorkload. Server.Register registers it beside the
// WorkloadService, since both are the workload process's.
type Governance struct {
	workloadv1.UnimplementedGovernanceServiceServer

	client    *clientv3.Client
	policies  *etcdstore.Collection[*workloadv1.Policy]
	envs      *etcdstore.Collection[*workloadv1.Environment]
	computes  *etcdstore.Collection[*workloadv1.ComputeResource]
	templates *etcdstore.Collection[*workloadv1.Template]
	creds     *etcdstore.Collection[*workloadv1.SealedCredential]
	sources   *etcdstore.Collection[*workloadv1.DataSource]
	projects  ProjectChecker
	clock     Clock
	retries   int
}

func newGovernance(cfg Config, deps Deps) *Governance {
	return &Governance{
		client: deps.Client,
		policies: etcdstore.NewCollection(deps.Client, etcdstore.PrefixPolicies,
			func() *workloadv1.Policy { return new(workloadv1.Policy) }),
		envs: etcdstore.NewCollection(deps.Client, etcdstore.PrefixEnvironments,
			func() *workloadv1.Environment { return new(workloadv1.Environment) }),
		computes: etcdstore.NewCollection(deps.Client, etcdstore.PrefixComputeResources,
			func() *workloadv1.ComputeResource { return new(workloadv1.ComputeResource) }),
		templates: etcdstore.NewCollection(deps.Client, etcdstore.PrefixTemplates,
			func() *workloadv1.Template { return new(workloadv1.Template) }),
		creds: etcdstore.NewCollection(deps.Client, etcdstore.PrefixCredentials,
			func() *workloadv1.SealedCredential { return new(workloadv1.SealedCredential) }),
		sources: etcdstore.NewCollection(deps.Client, etcdstore.PrefixDataSources,
			func() *workloadv1.DataSource { return new(workloadv1.DataSource) }),
		projects: deps.Projects,
		clock:    deps.Clock,
		retries:  cfg.UpdateRetries,
	}
}

// withEtag returns the item's message with its etag set.
func withEtag[T proto.Message](it etcdstore.Item[T]) T {
	m := it.Msg.ProtoReflect()
	m.Set(m.Descriptor().Fields().ByName("etag"), protoreflect.ValueOfString(it.Etag))
	return it.Msg
}

// checkScopeExists fails with DEPARTMENT_NOT_FOUND or PROJECT_NOT_FOUND
// (in field) when the scope names a department or project that does not
// exist.
func (g *Governance) checkScopeExists(ctx context.Context, scope, field string) error {
	var err error
	switch {
	case strings.HasPrefix(scope, departmentsPrefix):
		_, err = g.projects.Department(ctx, scope)
	case strings.HasPrefix(scope, projectsPrefix):
		_, err = g.projects.Project(ctx, scope)
	}
	if e := (*apierr.Error)(nil); errors.As(err, &e) && apierr.IsNotFound(err) {
		return e.InField(field)
	}
	return err
}

func policyNameRule(field string) *apierr.Error {
	return apierr.InvalidField(field, "must be policies/{type}, departments/{department}/policies/{type} or "+
		"projects/{project}/policies/{type}, where {type} is workspace, training or inference")
}

// parsePolicyName splits a policy name into scope and type id.
func parsePolicyName(name, field string) (scope, typ string, err error) {
	scope, typ, ok := parseScoped(name, policiesCollection)
	if !ok || policyType(typ) == workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED {
		return "", "", policyNameRule(field)
	}
	return scope, typ, nil
}

// GetPolicy returns the policy set at one scope for one type.
func (g *Governance) GetPolicy(ctx context.Context, req *workloadv1.GetPolicyRequest) (*workloadv1.Policy, error) {
	scope, typ, err := parsePolicyName(req.GetName(), "name")
	if err != nil {
		return nil, err
	}
	it, err := g.policies.Get(ctx, storeKey(scope, typ))
	if err != nil {
		return nil, storeError(err, apierr.Policy, req.GetName())
	}
	return described(withEtag(it), scope, typ), nil
}

// ListPolicies pages through the policies of every scope, in store key
// order (the account's, then the departments', then the projects'). What
// the caller may not view is left out by pkg/auth's filter on the page.
func (g *Governance) ListPolicies(ctx context.Context, req *workloadv1.ListPoliciesRequest) (*workloadv1.ListPoliciesResponse, error) {
	if req.GetPageSize() < 0 {
		return nil, apierr.InvalidField("page_size", "must be 0 or more (0 means 100)")
	}
	page, err := g.policies.List(ctx, "", etcdstore.PageSize(int(req.GetPageSize())), req.GetPageToken())
	if err != nil {
		return nil, storeError(err, apierr.Policy, "")
	}
	out := &workloadv1.ListPoliciesResponse{NextPageToken: page.NextPageToken}
	for _, it := range page.Items {
		scope, typ := scopeOfKey(it.ID)
		out.Policies = append(out.Policies, described(withEtag(it), scope, typ))
	}
	return out, nil
}

// described fills a policy's output-only scope and type from where it is
// stored.
func described(p *workloadv1.Policy, scope, typ string) *workloadv1.Policy {
	p.Scope = scope
	if scope == "" {
		p.Scope = "account"
	}
	p.WorkloadType = policyType(typ)
	return p
}

// UpdatePolicy replaces (with allow_missing, creates) a policy. Its rules
// must name fields of the spec, and none may rule a field that another
// scope of the same branch rules. The write is conditioned on no policy
// having changed since they were read, so two conflicting rules set at once
// cannot both pass.
func (g *Governance) UpdatePolicy(ctx context.Context, req *workloadv1.UpdatePolicyRequest) (*workloadv1.Policy, error) {
	p := req.GetPolicy()
	if p == nil {
		return nil, apierr.InvalidField("policy", "is required")
	}
	keep, err := policyMask(req.GetUpdateMask().GetPaths())
	if err != nil {
		return nil, err
	}
	p = proto.Clone(p).(*workloadv1.Policy)
	scope, typ, err := parsePolicyName(p.GetName(), "policy.name")
	if err != nil {
		return nil, err
	}
	if err := g.checkScopeExists(ctx, scope, "policy.name"); err != nil {
		return nil, err
	}
	branch, err := g.branch(ctx, scope)
	if err != nil {
		return nil, err
	}
	key := storeKey(scope, typ)
	for attempt := 0; ; attempt++ {
		all, rev, err := g.policies.ListAll(ctx, "")
		if err != nil {
			return nil, storeError(err, apierr.Policy, p.GetName())
		}
		var others []policy.Layer
		var current *etcdstore.Item[*workloadv1.Policy]
		for i, it := range all {
			s, t := scopeOfKey(it.ID)
			switch {
			case t != typ:
			case it.ID == key:
				current = &all[i]
			case branch(s):
				others = append(others, policy.Layer{Source: scopedName(s, policiesCollection, t), Policy: it.Msg})
			}
		}
		if current != nil {
			if err := g.mayReset(ctx, scope, current.Msg, "policies.edit", "policy"); err != nil {
				return nil, err
			}
		}
		p.SetBy = auth.ActingScope(ctx)
		if current != nil && keep["defaults"] {
			p.Defaults = current.Msg.GetDefaults()
		}
		if current != nil && keep["rules"] {
			p.Rules = current.Msg.GetRules()
		}
		if err := checkPolicy(p); err != nil {
			return nil, err
		}
		if field, src, found := policy.Conflict(p.GetRules(), others); found {
			return nil, apierr.FailedPrecondition(commonv1.ErrorReason_POLICY_RULE_CONFLICT, field,
				fmt.Sprintf("Field %q is already ruled by policy %s; a field's rule may be set at one scope of a branch only, so change or remove it there.", field, src)).
				With("scope", src)
		}
		switch {
		case current == nil && !req.GetAllowMissing():
			return nil, apierr.NotFound(apierr.Policy, p.GetName())
		case current != nil && p.GetEtag() != "" && p.GetEtag() != current.Etag:
			return nil, apierr.EtagMismatch(p.GetName(), current.Etag)
		}
		p.Etag, p.Scope, p.WorkloadType = "", "", workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED // from the name, not stored
		p.UpdateTime = timestamppb.New(g.clock.Now())
		val, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			return nil, err
		}
		resp, err := g.client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(g.policies.Prefix()).WithPrefix(), "<", rev+1)).
			Then(clientv3.OpPut(g.policies.Key(key), string(val))).Commit()
		if err != nil {
			return nil, storeError(fmt.Errorf("set policy %s: %w: %w", p.GetName(), etcdstore.ErrUnavailable, err), apierr.Policy, p.GetName())
		}
		if resp.Succeeded {
			p.Etag = etcdstore.FormatEtag(resp.Header.Revision)
			return described(p, scope, typ), nil
		}
		if attempt >= g.retries {
			return nil, apierr.EtagMismatch(p.GetName(), "")
		}
	}
}

// policyMask reads an UpdatePolicy update_mask: empty or "*" replaces the
// policy whole; otherwise the top-level fields it names (defaults, rules)
// are replaced and the others kept (keep). The REST gateway derives the
// mask from the JSON body, so paths below those fields ("rules.image.max")
// name them too; name and etag select the policy and are ignored, as are
// the output-only scope and workload_type.
func policyMask(paths []string) (keep map[string]bool, err error) {
	if len(paths) == 0 || slices.Contains(paths, "*") {
		return map[string]bool{}, nil
	}
	keep = map[string]bool{"defaults": true, "rules": true}
	for _, path := range paths {
		top, _, _ := strings.Cut(path, ".")
		switch top {
		case "defaults", "rules":
			delete(keep, top)
		case "name", "etag", "scope", "workload_type": // output only, from the name
		default:
			return nil, apierr.ImmutableField(path)
		}
	}
	return keep, nil
}

// checkPolicy normalises the rule keys and checks the rules and the
// defaults (values a spec may hold; an image is not required).
func checkPolicy(p *workloadv1.Policy) error {
	vs := policy.Normalize(p)
	if d := p.GetDefaults(); d != nil {
		var v violations
		d = proto.Clone(d).(*workloadv1.WorkloadSpec)
		if d.Image == "" {
			d.Image = "-"
		}
		validateSpec(&v, "policy.defaults", d)
		for _, fv := range v {
			vs = append(vs, policy.Violation{Field: fv.Field, Description: fv.Description})
		}
	}
	if len(vs) > 0 {
		return invalid(vs)
	}
	return nil
}

// branch returns whether a scope is on the same branch as scope (above or
// below it, not itself): the account is on every branch; a department's
// branch is the account and its projects; a project's the account and its
// department.
func (g *Governance) branch(ctx context.Context, scope string) (func(string) bool, error) {
	switch {
	case scope == "":
		return func(s string) bool { return s != "" }, nil
	case strings.HasPrefix(scope, departmentsPrefix):
		projects, err := g.projects.DepartmentProjects(ctx, scope)
		if err != nil {
			return nil, err
		}
		return func(s string) bool { return s == "" || slices.Contains(projects, s) }, nil
	default:
		p, err := g.projects.Project(ctx, scope)
		if err != nil {
			return nil, err
		}
		dept := p.GetDepartment()
		return func(s string) bool { return s == "" || s == dept }, nil
	}
}

// DeletePolicy removes a policy.
func (g *Governance) DeletePolicy(ctx context.Context, req *workloadv1.DeletePolicyRequest) (*emptypb.Empty, error) {
	scope, typ, err := parsePolicyName(req.GetName(), "name")
	if err != nil {
		return nil, err
	}
	key := storeKey(scope, typ)
	for attempt := 0; ; attempt++ {
		it, err := g.policies.Get(ctx, key)
		if err != nil {
			return nil, storeError(err, apierr.Policy, req.GetName())
		}
		if req.GetEtag() != "" && req.GetEtag() != it.Etag {
			return nil, apierr.EtagMismatch(req.GetName(), it.Etag)
		}
		if err := g.mayReset(ctx, scope, it.Msg, "policies.delete", "name"); err != nil {
			return nil, err
		}
		// Conditioned on the version judged: a policy set from above
		// meanwhile is judged again.
		_, err = g.policies.Delete(ctx, key, it.Etag)
		if !errors.Is(err, etcdstore.ErrEtagMismatch) || attempt >= g.retries {
			if err != nil {
				return nil, storeError(err, apierr.Policy, req.GetName())
			}
			return &emptypb.Empty{}, nil
		}
	}
}

// mayReset fails with PERMISSION_DENIED, naming the scope that set the
// stored policy, when the call does not act from that scope or a wider one
// (pkg/auth's ActingScope): a department's administrator may not loosen or
// delete what the account set on its department or its projects.
func (g *Governance) mayReset(ctx context.Context, scope string, stored *workloadv1.Policy, permission, field string) error {
	department := ""
	if strings.HasPrefix(scope, projectsPrefix) {
		p, err := g.projects.Project(ctx, scope)
		if err != nil {
			return err
		}
		department = p.GetDepartment()
	}
	if auth.Covers(auth.ActingScope(ctx), stored.GetSetBy(), department) {
		return nil
	}
	setBy := cmp.Or(stored.GetSetBy(), auth.AccountScope)
	return apierr.PermissionDenied(permission, setBy).InField(field).With("setBy", setBy)
}

// GetEffectivePolicy merges the policies in force for a project and type.
func (g *Governance) GetEffectivePolicy(ctx context.Context, req *workloadv1.GetEffectivePolicyRequest) (*workloadv1.EffectivePolicy, error) {
	scope, typ, err := parsePolicyName(req.GetName(), "name")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(scope, projectsPrefix) {
		return nil, apierr.InvalidField("name", "must be projects/{project}/policies/{type}: the effective policy is a project's")
	}
	p, err := g.projects.Project(ctx, scope)
	if err != nil {
		return nil, err
	}
	eff, err := g.effective(ctx, p, policyType(typ))
	if err != nil {
		return nil, err
	}
	out := &workloadv1.EffectivePolicy{Project: scope, Type: policyType(typ)}
	for _, name := range eff.Names() {
		e := eff.Fields[name]
		out.Fields = append(out.Fields, &workloadv1.EffectiveField{Field: name, DefaultValue: eff.DefaultText(name),
			DefaultSource: e.DefaultSource, Rule: e.Rule, RuleSource: e.RuleSource})
	}
	return out, nil
}

// effective is the merge of the account's, the project's department's and
// the project's policies for typ, read in one transaction (one round trip
// on the submit path).
func (g *Governance) effective(ctx context.Context, p *quotav1.Project, typ workloadv1.WorkloadType) (*policy.Effective, error) {
	id := clusterproto.TypeName(typ)
	scopes := []string{"", p.GetDepartment(), p.GetName()}
	ops := make([]clientv3.Op, len(scopes))
	for i, scope := range scopes {
		ops[i] = clientv3.OpGet(g.policies.Key(storeKey(scope, id)))
	}
	resp, err := g.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, storeError(fmt.Errorf("read the policies of %s: %w: %w", p.GetName(), etcdstore.ErrUnavailable, err), apierr.Policy, p.GetName())
	}
	var layers []policy.Layer
	for i, scope := range scopes {
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		pol := new(workloadv1.Policy)
		if err := proto.Unmarshal(kvs[0].Value, pol); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kvs[0].Key, err)
		}
		layers = append(layers, policy.Layer{Source: scopedName(scope, policiesCollection, id), Policy: pol})
	}
	return policy.Merge(layers), nil
}

// invalid turns policy violations into one INVALID_FIELD error.
func invalid(vs []policy.Violation) error {
	out := make([]apierr.FieldViolation, len(vs))
	for i, v := range vs {
		out[i] = apierr.FieldViolation{Field: v.Field, Description: v.Description}
	}
	return apierr.Invalid(out...)
}
