package workload

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// submission is a create request with its spec completed from assets and
// policy defaults, and the scheduling limits the workload will be held to.
type submission struct {
	req    *workloadv1.CreateWorkloadRequest
	limits *workloadv1.WorkloadLimits
}

// prepare completes and checks a create request whose parent is a valid
// project name: the same steps for every interface (gRPC, REST, CLI), since
// they all arrive here.
func (s *Server) prepare(ctx context.Context, req *workloadv1.CreateWorkloadRequest) (*submission, error) {
	p, err := s.projects.Project(ctx, req.GetParent())
	if err != nil {
		return nil, err
	}
	if req, err = s.applyTemplate(ctx, p, req); err != nil {
		return nil, err
	}
	in := req.GetWorkload()
	spec := in.GetSpec()
	if spec == nil {
		if req.GetEnvironment() == "" && req.GetComputeResource() == "" {
			return nil, validateCreate(req)
		}
		spec = &workloadv1.WorkloadSpec{}
	}
	var env *workloadv1.Environment
	if ref := req.GetEnvironment(); ref != "" {
		if env, err = environmentAsset.resolve(ctx, s.gov, p, ref, "environment"); err != nil {
			return nil, err
		}
	}
	var comp *workloadv1.ComputeResource
	if ref := req.GetComputeResource(); ref != "" {
		if comp, err = computeAsset.resolve(ctx, s.gov, p, ref, "compute_resource"); err != nil {
			return nil, err
		}
	}
	submitted := withAssets(spec, env, comp)
	if err := s.creds.resolveRefs(ctx, p, submitted); err != nil {
		return nil, err
	}
	if err := s.resolveDataSources(ctx, p, submitted); err != nil {
		return nil, err
	}

	out := proto.Clone(req).(*workloadv1.CreateWorkloadRequest)
	out.Workload = &workloadv1.Workload{Type: in.GetType(), Spec: submitted, Labels: in.GetLabels(), Annotations: in.GetAnnotations()}
	if !validType(in.GetType()) {
		return nil, validateCreate(out)
	}
	eff, err := s.gov.effective(ctx, p, in.GetType())
	if err != nil {
		return nil, err
	}
	st, err := s.projects.Settings(ctx)
	if err != nil {
		return nil, err
	}
	out.Workload.Spec = eff.Apply(submitted)
	applySettings(st, eff, in.GetType(), out.Workload.Spec)
	if err := validateCreate(out); err != nil {
		return nil, err
	}
	if out.Workload.Spec.GetRegistryCredential() != submitted.GetRegistryCredential() || out.Workload.Spec.GetImage() != submitted.GetImage() {
		// A policy's default named the credential or the image: resolved and
		// checked (of the image's registry) as a submitter's would be.
		if err := s.creds.resolveRefs(ctx, p, out.Workload.Spec); err != nil {
			return nil, err
		}
	}
	var v violations
	checkSettings(&v, st, out.Workload.Spec)
	for _, pv := range eff.Check("workload.spec.", submitted, out.Workload.Spec) {
		v.add(pv.Field, pv.Description)
	}
	for _, pv := range masterViolations(eff, submitted, out.Workload.Spec) {
		v.add(pv.Field, pv.Description)
	}
	rules, source, err := s.schedulingRules(ctx, p, in.GetType())
	if err != nil {
		return nil, err
	}
	if types := rules.GetNodeTypes(); len(types) > 0 && !slices.Contains(types, out.Workload.Spec.GetNodeType()) {
		v.add("workload.spec.node_type", fmt.Sprintf("must be one of %s (the %s scheduling rule of %s)",
			strings.Join(types, ", "), clusterproto.TypeName(in.GetType()), source))
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	prio, _ := clusterproto.EffectivePriority(out.Workload) // validated
	return &submission{req: out, limits: withAutoSuspend(limitsOf(rules, source, prio.Preemptible), st, in.GetType())}, nil
}

// schedulingRules are the rules in force for typ in project p: the
// project's entry for the type, else its department's; nil when neither
// has one. source names where they come from.
func (s *Server) schedulingRules(ctx context.Context, p *quotav1.Project, typ workloadv1.WorkloadType) (*quotav1.SchedulingRules, string, error) {
	if r := rulesFor(p.GetSchedulingRules(), typ); r != nil {
		return r, p.GetName(), nil
	}
	if p.GetDepartment() == "" {
		return nil, "", nil
	}
	d, err := s.projects.Department(ctx, p.GetDepartment())
	if err != nil {
		return nil, "", err
	}
	if r := rulesFor(d.GetSchedulingRules(), typ); r != nil {
		return r, d.GetName(), nil
	}
	return nil, "", nil
}

func rulesFor(rules []*quotav1.SchedulingRules, typ workloadv1.WorkloadType) *quotav1.SchedulingRules {
	for _, r := range rules {
		if r.GetWorkloadType() == typ {
			return r
		}
	}
	return nil
}

// limitsOf is the copy of the rules a workload keeps (nil without rules):
// a preemptible workload's limits are the rule's preemptible ones where it
// sets them (workspace rules only).
func limitsOf(r *quotav1.SchedulingRules, source string, preemptible bool) *workloadv1.WorkloadLimits {
	if r == nil {
		return nil
	}
	l := &workloadv1.WorkloadLimits{PreemptWhenIdle: r.GetPreemptWhenIdle(), NodeTypes: r.GetNodeTypes(), Source: source}
	timeLimit, idleLimit := r.GetTimeLimit(), r.GetIdleGpuLimit()
	if d := r.GetPreemptibleTimeLimit(); preemptible && d != nil {
		timeLimit = d
	}
	if d := r.GetPreemptibleIdleGpuLimit(); preemptible && d != nil {
		idleLimit = d
	}
	if timeLimit != nil {
		l.TimeLimit = durationpb.New(timeLimit.AsDuration())
	}
	if idleLimit != nil {
		l.IdleGpuLimit = durationpb.New(idleLimit.AsDuration())
	}
	return l
}
