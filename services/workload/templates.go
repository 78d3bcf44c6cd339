package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// templateAsset is the one create/get/list/delete flow for templates.
var templateAsset = asset[*workloadv1.Template]{
	collection: templateCollection, field: "template", idField: "template_id", resource: apierr.Template,
	items: func(g *Governance) *etcdstore.Collection[*workloadv1.Template] { return g.templates },
	check: checkTemplate,
}

// checkTemplate validates what a template holds as far as it can without a
// project: its spec's fields (the image may come from an environment) and
// the form of the assets it names, which are resolved at submit.
func checkTemplate(v *violations, field string, t *workloadv1.Template) {
	if t.GetType() != workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED && !validType(t.GetType()) {
		v.add(field+".type", "must be a workload type (training, workspace, inference) or unset")
	}
	spec := proto.Clone(t.GetSpec()).(*workloadv1.WorkloadSpec)
	if spec == nil {
		spec = &workloadv1.WorkloadSpec{}
	}
	if spec.Image == "" {
		spec.Image = "-" // may come from the environment or the submission
	}
	validateSpec(v, field+".spec", spec)
	checkRef(v, environmentAsset, t.GetEnvironment(), field+".environment")
	checkRef(v, computeAsset, t.GetComputeResource(), field+".compute_resource")
}

// checkRef checks the form of an asset reference: a full name or an id.
func checkRef[T proto.Message](v *violations, a asset[T], ref, field string) {
	if ref == "" {
		return
	}
	if _, _, ok := parseScoped(ref, a.collection); (strings.Contains(ref, "/") && !ok) || (!strings.Contains(ref, "/") && !validID(ref)) {
		v.add(field, a.rule())
	}
}

// CreateTemplate stores a new template at a scope.
func (g *Governance) CreateTemplate(ctx context.Context, req *workloadv1.CreateTemplateRequest) (*workloadv1.Template, error) {
	return templateAsset.create(ctx, g, req.GetParent(), req.GetTemplateId(), req.GetTemplate())
}

// GetTemplate returns one template.
func (g *Governance) GetTemplate(ctx context.Context, req *workloadv1.GetTemplateRequest) (*workloadv1.Template, error) {
	return templateAsset.get(ctx, g, req.GetName())
}

// ListTemplates pages through one scope's templates.
func (g *Governance) ListTemplates(ctx context.Context, req *workloadv1.ListTemplatesRequest) (*workloadv1.ListTemplatesResponse, error) {
	items, next, err := templateAsset.list(ctx, g, req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &workloadv1.ListTemplatesResponse{Templates: items, NextPageToken: next}, nil
}

// DeleteTemplate removes a template.
func (g *Governance) DeleteTemplate(ctx context.Context, req *workloadv1.DeleteTemplateRequest) (*emptypb.Empty, error) {
	return templateAsset.delete(ctx, g, req.GetName(), req.GetEtag())
}

// RenameTemplate moves a template to a new id of its scope in one
// transaction: the new key is created only while absent and the old one
// deleted only while unchanged, so a rename never leaves both or neither.
func (g *Governance) RenameTemplate(ctx context.Context, req *workloadv1.RenameTemplateRequest) (*workloadv1.Template, error) {
	scope, id, err := templateAsset.parse(req.GetName(), "name")
	if err != nil {
		return nil, err
	}
	newID := req.GetNewTemplateId()
	if !validID(newID) {
		return nil, apierr.InvalidField("new_template_id", idRule)
	}
	old, err := g.templates.Get(ctx, storeKey(scope, id))
	if err != nil {
		return nil, storeError(err, apierr.Template, req.GetName())
	}
	if etag := req.GetEtag(); etag != "" && etag != old.Etag {
		return nil, apierr.EtagMismatch(req.GetName(), old.Etag)
	}
	newName := scopedName(scope, templateCollection, newID)
	if newID == id {
		return nil, apierr.AlreadyExists(apierr.Template, newName).InField("new_template_id")
	}
	t := proto.Clone(old.Msg).(*workloadv1.Template)
	t.Name, t.Etag = newName, ""
	rev, err := etcdstore.NewBatch(g.client).
		PutIf(g.templates.Key(storeKey(scope, newID)), t, 0).
		DeleteIf(g.templates.Key(storeKey(scope, id)), old.Revision).
		Commit(ctx)
	if errors.Is(err, etcdstore.ErrConflict) {
		if _, gerr := g.templates.Get(ctx, storeKey(scope, newID)); gerr == nil {
			return nil, apierr.AlreadyExists(apierr.Template, newName).InField("new_template_id")
		}
		now, gerr := g.templates.Get(ctx, storeKey(scope, id))
		if gerr != nil {
			return nil, storeError(gerr, apierr.Template, req.GetName())
		}
		return nil, apierr.EtagMismatch(req.GetName(), now.Etag).WithCause(err) // changed meanwhile
	}
	if err != nil {
		return nil, storeError(err, apierr.Template, req.GetName())
	}
	t.Etag = etcdstore.FormatEtag(rev)
	return t, nil
}

// applyTemplate completes a create request from the template it names:
// the spec's unset fields from the template's spec (environment variables
// merged by name, the submission's winning), the environment and compute
// resource where the request names none, and the type where it has none;
// a template of another type is refused.
func (s *Server) applyTemplate(ctx context.Context, p *quotav1.Project, req *workloadv1.CreateWorkloadRequest) (*workloadv1.CreateWorkloadRequest, error) {
	ref := req.GetTemplate()
	if ref == "" {
		return req, nil
	}
	t, err := templateAsset.resolve(ctx, s.gov, p, ref, "template")
	if err != nil {
		return nil, err
	}
	out := proto.Clone(req).(*workloadv1.CreateWorkloadRequest)
	if out.Workload == nil {
		out.Workload = &workloadv1.Workload{}
	}
	switch typ := out.Workload.GetType(); {
	case t.GetType() == workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED:
	case typ == workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED:
		out.Workload.Type = t.GetType()
	case typ != t.GetType():
		return nil, apierr.InvalidField("template", fmt.Sprintf("template %s submits %s workloads, not %s",
			t.GetName(), clusterproto.TypeName(t.GetType()), clusterproto.TypeName(typ)))
	}
	if out.Environment == "" {
		out.Environment = t.GetEnvironment()
	}
	if out.ComputeResource == "" {
		out.ComputeResource = t.GetComputeResource()
	}
	out.Workload.Spec = overSpec(t.GetSpec(), out.Workload.GetSpec())
	return out, nil
}

// overSpec is base with every field own sets put over it: a scalar or
// message replaced, a list replaced whole, except environment variables,
// merged by name with own's winning (as an environment's are).
func overSpec(base, own *workloadv1.WorkloadSpec) *workloadv1.WorkloadSpec {
	out := &workloadv1.WorkloadSpec{}
	if base != nil {
		out = proto.Clone(base).(*workloadv1.WorkloadSpec)
	}
	baseEnv := out.Env
	out.Env = nil
	m := out.ProtoReflect()
	if own != nil {
		proto.Clone(own).ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			m.Set(fd, v)
			return true
		})
	}
	return withAssets(out, &workloadv1.Environment{Env: baseEnv}, nil)
}
