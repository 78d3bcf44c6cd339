package kube

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
)

// ProjectNamespacePrefix: a project's users' pods live in the namespace
// runway-{project}, one per project, which Runway creates or adopts
// (projects.go); whoever may create pods there is in the project as far as
// the cluster is concerned.
const ProjectNamespacePrefix = "runway-"

// ProjectNamespace is the namespace of a project's users' pods.
func ProjectNamespace(project string) string { return ProjectNamespacePrefix + project }

// foreignProject is the project of a user's pod that asks Runway to
// schedule it: schedulerName runway, in its project's namespace (a
// runway.io/project label, if any, must name the same project), not created
// by Runway; "" for any other pod, so a pod cannot place itself in another
// project by its labels.
func foreignProject(p *corev1.Pod) string {
	if p.Spec.SchedulerName != SchedulerName || p.Labels[LabelWorkload] != "" {
		return ""
	}
	project, ok := strings.CutPrefix(p.Namespace, ProjectNamespacePrefix)
	if !ok || project == "" {
		return ""
	}
	if l := p.Labels[LabelProject]; l != "" && l != project {
		return ""
	}
	return project
}

// foreignWorkload is the workload name of a user's pod that asks Runway to
// schedule it (foreignProject); "" for any other pod.
func foreignWorkload(p *corev1.Pod) string {
	project := foreignProject(p)
	if project == "" {
		return ""
	}
	return "projects/" + project + "/workloads/" + foreignWorkloadID(p.Name, string(p.UID))
}

// ensureForeign creates the workload of a user's pod that is not bound yet:
// one pod, the pod's requests, type training unless the pod says otherwise
// (label runway.io/workload-type: workspace|training|inference).
func (r *runtime) ensureForeign(ctx context.Context, p *corev1.Pod) error {
	name := foreignWorkload(p)
	if r.isCreated(name) || p.DeletionTimestamp != nil {
		return nil
	}
	spec, err := foreignSpec(p)
	if err != nil {
		r.log.Warn("kubernetes runtime: pod cannot be scheduled", "pod", p.Namespace+"/"+p.Name, "err", err)
		return nil
	}
	project := foreignProject(p)
	if ok, err := r.adopted(ctx, project); err != nil || !ok {
		// Not (yet) the project's namespace: syncProject queues its pods
		// again once it adopts it.
		if err == nil {
			r.log.Warn("kubernetes runtime: pod's namespace is not its project's (label "+LabelProject+"); not scheduled",
				"pod", p.Namespace+"/"+p.Name)
		}
		return err
	}
	if spec.GetGpu().GetFractionMilli() > 0 {
		if err := checkUserGPU(p); err != nil {
			// Its containers cannot change: refused once, for good.
			r.refuseUserGPU(ctx, p, err)
			r.setCreated(name, true)
			return nil
		}
	}
	typ := workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING
	if t, ok := workloadv1.WorkloadType_value["WORKLOAD_TYPE_"+upper(p.Labels[LabelWorkloadType])]; ok && t != 0 {
		typ = workloadv1.WorkloadType(t)
	}
	_, err = r.cfg.Workloads.CreateWorkload(auth.ForProject(ctx, "projects/"+project), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/" + project, WorkloadId: foreignWorkloadID(p.Name, string(p.UID)),
		Workload: &workloadv1.Workload{Type: typ, Spec: spec},
	})
	switch status.Code(err) {
	case codes.OK, codes.AlreadyExists:
		r.setCreated(name, true)
		r.log.Info("kubernetes runtime: pod scheduled as a workload", "pod", p.Namespace+"/"+p.Name, "workload", name)
		return nil
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.PermissionDenied:
		// The pod asks for something Runway refuses (no such project, a bad
		// request): retrying does not help; it stays Pending.
		r.log.Warn("kubernetes runtime: pod's workload refused", "pod", p.Namespace+"/"+p.Name, "err", err)
		r.setCreated(name, true)
		return nil
	}
	return fmt.Errorf("create workload %s for pod %s/%s: %w", name, p.Namespace, p.Name, err)
}

// EnvUserPod in a workload's spec names the user's pod (namespace/name)
// it was made from: that pod is the workload's only one.
const EnvUserPod = "RUNWAY_KUBERNETES_POD"

// userPod is the user's pod a workload was made from; "" for any other.
func userPod(ws *workloadv1.WorkloadSpec) string {
	for _, e := range ws.GetEnv() {
		if e.GetName() == EnvUserPod {
			return e.GetValue()
		}
	}
	return ""
}

// LabelWorkloadType on a user's pod names its workload type.
const LabelWorkloadType = "runway.io/workload-type"

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// foreignSpec is the workload spec of a user's pod: the sum of its
// containers' requests (nvidia.com/gpu devices, or the gpu-fraction
// annotation), the first container's image and command.
func foreignSpec(p *corev1.Pod) (*workloadv1.WorkloadSpec, error) {
	spec := &workloadv1.WorkloadSpec{Pods: 1, Env: []*workloadv1.EnvVar{{Name: EnvUserPod, Value: p.Namespace + "/" + p.Name}}}
	gpus := podGPUs(p)
	for _, c := range p.Spec.Containers {
		spec.MilliCpu += c.Resources.Requests.Cpu().MilliValue()
		spec.MemoryBytes += c.Resources.Requests.Memory().Value()
	}
	if len(p.Spec.Containers) > 0 {
		c := p.Spec.Containers[0]
		spec.Image, spec.Command, spec.Args = c.Image, c.Command, c.Args
	}
	if f := p.Annotations[AnnotationGPUFraction]; f != "" {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 || v >= 1 || gpus > 0 {
			return nil, fmt.Errorf("annotation %s=%q: want a fraction between 0 and 1, and no %s request", AnnotationGPUFraction, f, ResourceGPU)
		}
		spec.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: int32(math.Round(v * 1000))}}
	} else if gpus > 0 {
		spec.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: int32(gpus)}}
	}
	return spec, nil
}

// podGPUs is what the pod's containers request of nvidia.com/gpu (their
// limits where they name no request).
func podGPUs(p *corev1.Pod) int64 {
	var gpus int64
	for _, c := range p.Spec.Containers {
		g := c.Resources.Requests.Name(ResourceGPU, resource.DecimalSI)
		if g.IsZero() {
			g = c.Resources.Limits.Name(ResourceGPU, resource.DecimalSI)
		}
		gpus += g.Value()
	}
	return gpus
}

// deleteForeign deletes the workload of a user's pod that is gone.
func (r *runtime) deleteForeign(ctx context.Context, name string) error {
	project, _, _ := strings.Cut(name, "/workloads/")
	_, err := r.cfg.Workloads.DeleteWorkload(auth.ForProject(ctx, project), &workloadv1.DeleteWorkloadRequest{Name: name})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("delete workload %s of a deleted pod: %w", name, err)
	}
	r.setCreated(name, false)
	return nil
}

func (r *runtime) isCreated(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.created[name]
}

func (r *runtime) setCreated(name string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ok {
		r.created[name] = true
	} else {
		delete(r.created, name)
	}
}
