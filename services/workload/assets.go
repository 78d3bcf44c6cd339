package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// asset is what the one create/get/list/delete flow needs of environments
// and compute resources: both are scoped, named, immutable resources.
type asset[T proto.Message] struct {
	collection string // the name's collection part, "environments"
	field      string // the request field holding the resource, "environment"
	idField    string // "environment_id"
	resource   apierr.Resource
	items      func(g *Governance) *etcdstore.Collection[T]
	check      func(v *violations, field string, msg T)
}

var (
	environmentAsset = asset[*workloadv1.Environment]{
		collection: envsCollection, field: "environment", idField: "environment_id", resource: apierr.Environment,
		items: func(g *Governance) *etcdstore.Collection[*workloadv1.Environment] { return g.envs },
		check: func(v *violations, field string, e *workloadv1.Environment) {
			validateSpec(v, field, environmentSpec(e))
		},
	}
	computeAsset = asset[*workloadv1.ComputeResource]{
		collection: computeCollection, field: "compute_resource", idField: "compute_resource_id", resource: apierr.ComputeResource,
		items: func(g *Governance) *etcdstore.Collection[*workloadv1.ComputeResource] { return g.computes },
		check: func(v *violations, field string, c *workloadv1.ComputeResource) {
			s := computeSpec(c)
			s.Image = "-" // a compute resource says nothing about the image
			validateSpec(v, field, s)
		},
	}
)

// environmentSpec is what an environment contributes to a spec.
func environmentSpec(e *workloadv1.Environment) *workloadv1.WorkloadSpec {
	return &workloadv1.WorkloadSpec{Image: e.GetImage(), Command: e.GetCommand(), Args: e.GetArgs(), Env: e.GetEnv(),
		ImagePullPolicy: e.GetImagePullPolicy(), RegistryCredential: e.GetRegistryCredential(), Tools: e.GetTools()}
}

// computeSpec is what a compute resource contributes to a spec.
func computeSpec(c *workloadv1.ComputeResource) *workloadv1.WorkloadSpec {
	return &workloadv1.WorkloadSpec{Gpu: c.GetGpu(), MilliCpu: c.GetMilliCpu(), MemoryBytes: c.GetMemoryBytes()}
}

func (a asset[T]) nameRule(field string) *apierr.Error {
	return apierr.InvalidField(field, a.rule())
}

// rule is what a name (or reference) of the asset must be.
func (a asset[T]) rule() string {
	return fmt.Sprintf("must be %[1]s/{id}, departments/{department}/%[1]s/{id} or projects/{project}/%[1]s/{id}", a.collection)
}

func (a asset[T]) parse(name, field string) (scope, id string, err error) {
	scope, id, ok := parseScoped(name, a.collection)
	if !ok || !validID(id) {
		return "", "", a.nameRule(field)
	}
	return scope, id, nil
}

func (a asset[T]) create(ctx context.Context, g *Governance, parent, id string, msg T) (T, error) {
	var zero T
	var v violations
	if !parseScope(parent) {
		v.add("parent", "must be empty (the account), departments/{department} or projects/{project}")
	}
	if !validID(id) {
		v.add(a.idField, idRule)
	}
	if msg.ProtoReflect().IsValid() {
		a.check(&v, a.field, msg)
	} else {
		v.add(a.field, "is required")
	}
	if err := v.err(); err != nil {
		return zero, err
	}
	if err := g.checkScopeExists(ctx, parent, "parent"); err != nil {
		return zero, err
	}
	msg = proto.Clone(msg).(T)
	name := scopedName(parent, a.collection, id)
	m := msg.ProtoReflect()
	fields := m.Descriptor().Fields()
	m.Set(fields.ByName("name"), protoreflect.ValueOfString(name))
	m.Set(fields.ByName("etag"), protoreflect.ValueOfString(""))
	m.Set(fields.ByName("create_time"), protoreflect.ValueOfMessage(timestamppb.New(g.clock.Now()).ProtoReflect()))
	it, err := a.items(g).Create(ctx, storeKey(parent, id), msg)
	if err != nil {
		return zero, storeError(err, a.resource, name)
	}
	return withEtag(it), nil
}

func (a asset[T]) get(ctx context.Context, g *Governance, name string) (T, error) {
	var zero T
	scope, id, err := a.parse(name, "name")
	if err != nil {
		return zero, err
	}
	it, err := a.items(g).Get(ctx, storeKey(scope, id))
	if err != nil {
		return zero, storeError(err, a.resource, name)
	}
	return withEtag(it), nil
}

func (a asset[T]) list(ctx context.Context, g *Governance, parent string, size int32, token string) ([]T, string, error) {
	if !parseScope(parent) {
		return nil, "", apierr.InvalidField("parent", "must be empty (the account), departments/{department} or projects/{project}")
	}
	if size < 0 {
		return nil, "", apierr.InvalidField("page_size", "must be 0 or more (0 means 100)")
	}
	page, err := a.items(g).List(ctx, storeKey(parent, ""), etcdstore.PageSize(int(size)), token)
	if err != nil {
		return nil, "", storeError(err, a.resource, parent)
	}
	out := make([]T, len(page.Items))
	for i, it := range page.Items {
		out[i] = withEtag(it)
	}
	return out, page.NextPageToken, nil
}

func (a asset[T]) delete(ctx context.Context, g *Governance, name, etag string) (*emptypb.Empty, error) {
	scope, id, err := a.parse(name, "name")
	if err != nil {
		return nil, err
	}
	if _, err := a.items(g).Delete(ctx, storeKey(scope, id), etag); err != nil {
		return nil, storeError(err, a.resource, name)
	}
	return &emptypb.Empty{}, nil
}

// resolve finds the asset a submission to project p names in field: a full
// name, which must be of the account, p's department or p itself; or an
// id, looked up in p, then its department, then the account.
func (a asset[T]) resolve(ctx context.Context, g *Governance, p *quotav1.Project, ref, field string) (T, error) {
	var zero T
	visible := []string{p.GetName(), p.GetDepartment(), ""}
	if strings.Contains(ref, "/") {
		scope, id, err := a.parse(ref, field)
		if err != nil {
			return zero, err
		}
		found := false
		for _, s := range visible {
			found = found || s == scope
		}
		if !found {
			return zero, apierr.InvalidField(field, fmt.Sprintf("must be of the account, department %s or project %s; %s is not",
				p.GetDepartment(), p.GetName(), scopeDisplay(scope)))
		}
		visible = []string{scope}
		ref = id
	} else if !validID(ref) {
		return zero, a.nameRule(field)
	}
	for _, scope := range visible {
		it, err := a.items(g).Get(ctx, storeKey(scope, ref))
		switch {
		case err == nil:
			return it.Msg, nil
		case !errors.Is(err, etcdstore.ErrNotFound):
			return zero, storeError(err, a.resource, ref)
		}
	}
	name := ref
	if len(visible) == 1 {
		name = scopedName(visible[0], a.collection, ref)
	}
	return zero, apierr.NotFound(a.resource, name).InField(field)
}

// CreateEnvironment stores a new environment at a scope.
func (g *Governance) CreateEnvironment(ctx context.Context, req *workloadv1.CreateEnvironmentRequest) (*workloadv1.Environment, error) {
	return environmentAsset.create(ctx, g, req.GetParent(), req.GetEnvironmentId(), req.GetEnvironment())
}

// GetEnvironment returns one environment.
func (g *Governance) GetEnvironment(ctx context.Context, req *workloadv1.GetEnvironmentRequest) (*workloadv1.Environment, error) {
	return environmentAsset.get(ctx, g, req.GetName())
}

// ListEnvironments pages through one scope's environments.
func (g *Governance) ListEnvironments(ctx context.Context, req *workloadv1.ListEnvironmentsRequest) (*workloadv1.ListEnvironmentsResponse, error) {
	items, next, err := environmentAsset.list(ctx, g, req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &workloadv1.ListEnvironmentsResponse{Environments: items, NextPageToken: next}, nil
}

// DeleteEnvironment removes an environment.
func (g *Governance) DeleteEnvironment(ctx context.Context, req *workloadv1.DeleteEnvironmentRequest) (*emptypb.Empty, error) {
	return environmentAsset.delete(ctx, g, req.GetName(), req.GetEtag())
}

// CreateComputeResource stores a new compute resource at a scope.
func (g *Governance) CreateComputeResource(ctx context.Context, req *workloadv1.CreateComputeResourceRequest) (*workloadv1.ComputeResource, error) {
	return computeAsset.create(ctx, g, req.GetParent(), req.GetComputeResourceId(), req.GetComputeResource())
}

// GetComputeResource returns one compute resource.
func (g *Governance) GetComputeResource(ctx context.Context, req *workloadv1.GetComputeResourceRequest) (*workloadv1.ComputeResource, error) {
	return computeAsset.get(ctx, g, req.GetName())
}

// ListComputeResources pages through one scope's compute resources.
func (g *Governance) ListComputeResources(ctx context.Context, req *workloadv1.ListComputeResourcesRequest) (*workloadv1.ListComputeResourcesResponse, error) {
	items, next, err := computeAsset.list(ctx, g, req.GetParent(), req.GetPageSize(), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	return &workloadv1.ListComputeResourcesResponse{ComputeResources: items, NextPageToken: next}, nil
}

// DeleteComputeResource removes a compute resource.
func (g *Governance) DeleteComputeResource(ctx context.Context, req *workloadv1.DeleteComputeResourceRequest) (*emptypb.Empty, error) {
	return computeAsset.delete(ctx, g, req.GetName(), req.GetEtag())
}

// withAssets fills the fields spec leaves unset from the environment and
// the compute resource (either may be nil). Environment variables: the
// environment's first, then the spec's, a spec variable replacing the
// environment's of the same name.
func withAssets(spec *workloadv1.WorkloadSpec, env *workloadv1.Environment, comp *workloadv1.ComputeResource) *workloadv1.WorkloadSpec {
	out := proto.Clone(spec).(*workloadv1.WorkloadSpec)
	if env != nil {
		if out.Image == "" {
			out.Image = env.GetImage()
		}
		if len(out.Command) == 0 {
			out.Command = env.GetCommand()
		}
		if len(out.Args) == 0 {
			out.Args = env.GetArgs()
		}
		if out.ImagePullPolicy == workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_UNSPECIFIED {
			out.ImagePullPolicy = env.GetImagePullPolicy()
		}
		if out.RegistryCredential == "" {
			out.RegistryCredential = env.GetRegistryCredential()
		}
		if len(out.Tools) == 0 {
			for _, t := range env.GetTools() {
				out.Tools = append(out.Tools, proto.Clone(t).(*workloadv1.Tool))
			}
		}
		own := map[string]bool{}
		for _, e := range out.Env {
			own[e.GetName()] = true
		}
		var merged []*workloadv1.EnvVar
		for _, e := range env.GetEnv() {
			if !own[e.GetName()] {
				merged = append(merged, proto.Clone(e).(*workloadv1.EnvVar))
			}
		}
		out.Env = append(merged, out.Env...)
	}
	if comp != nil {
		if out.Gpu == nil && comp.GetGpu() != nil {
			out.Gpu = proto.Clone(comp.GetGpu()).(*workloadv1.GpuRequest)
		}
		if out.MilliCpu == 0 {
			out.MilliCpu = comp.GetMilliCpu()
		}
		if out.MemoryBytes == 0 {
			out.MemoryBytes = comp.GetMemoryBytes()
		}
	}
	return out
}
