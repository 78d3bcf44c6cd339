package clusterproto

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
)

// ErrNotConvertible is wrapped by ToClusterSpec when a stored workload cannot
// be described to pkg/cluster (a malformed name, an unknown type or
// priority). Workloads that went through CreateWorkload always convert; the
// error means a bug or a hand-written key.
var ErrNotConvertible = errors.New("workload cannot be converted for the scheduler")

// ClusterID is the pkg/cluster workload ID of a workload: "{project}/{workload}",
// which is also its key under the workloads prefix.
func ClusterID(project, id string) string { return project + "/" + id }

// ToClusterSpec describes a stored workload to the scheduler core
// (cluster.State.Submit), with every default of the API applied:
//
//   - ID is "{project}/{workload}", Name the workload id, Project the project
//     id (the queue name), Type "workspace", "training" or "inference";
//   - Priority is spec.priority, or the type's default when empty;
//   - Pods and MinPods are spec.pods (0 means 1) and spec.min_pods (0 means
//     pods);
//   - Pod is the per-pod request: whole devices as devices × 1000 milli-GPUs,
//     a fraction as its thousandths, GPU memory as GPUMemory bytes, CPU in
//     milli-cores, memory in bytes;
//   - Pools are the node pool ids without "nodepools/", in preference order.
//     Empty means the project's default_node_pools (QuotaService), which the
//     caller fills in: pkg/cluster would otherwise use its pool "default";
//   - Submitted is create_time as a duration since the Unix epoch, so that
//     older workloads sort first across restarts of the scheduler.
//
// It does not look at status or spec.suspended: which workloads the
// scheduler submits, and what they already hold, is its business.
func ToClusterSpec(w *workloadv1.Workload) (cluster.WorkloadSpec, error) {
	project, id, ok := ParseWorkloadName(w.GetName())
	if !ok {
		return cluster.WorkloadSpec{}, fmt.Errorf("workload name %q: %w", w.GetName(), ErrNotConvertible)
	}
	typ := TypeName(w.GetType())
	if typ == "" {
		return cluster.WorkloadSpec{}, fmt.Errorf("workload %s: type %v: %w", w.GetName(), w.GetType(), ErrNotConvertible)
	}
	prio, err := EffectivePriority(w)
	if err != nil {
		return cluster.WorkloadSpec{}, fmt.Errorf("workload %s: %w: %w", w.GetName(), err, ErrNotConvertible)
	}
	spec := w.GetSpec()
	var pools []string
	for _, np := range spec.GetNodePools() {
		pools = append(pools, strings.TrimPrefix(np, "nodepools/"))
	}
	return cluster.WorkloadSpec{
		ID:        ClusterID(project, id),
		Name:      id,
		Project:   project,
		Type:      typ,
		Priority:  prio,
		Pods:      int(EffectivePods(spec)),
		MinPods:   int(EffectiveMinPods(spec)),
		Pod:       PodRequest(spec),
		Lead:      LeadRequest(spec),
		Pools:     pools,
		NodeType:  spec.GetNodeType(),
		Submitted: submitted(w),
	}, nil
}

// EffectivePriority is the workload's priority class: spec.priority, or the
// default of its type when empty (shared/SCHEDULING.md §4).
func EffectivePriority(w *workloadv1.Workload) (cluster.Priority, error) {
	if name := w.GetSpec().GetPriority(); name != "" {
		return cluster.PriorityByName(name)
	}
	return cluster.DefaultPriority(TypeName(w.GetType())), nil
}

// PodRequest is what each pod of spec asks for, in pkg/cluster's units.
func PodRequest(spec *workloadv1.WorkloadSpec) cluster.PodRequest {
	r := cluster.PodRequest{CPU: spec.GetMilliCpu(), Memory: spec.GetMemoryBytes()}
	switch a := spec.GetGpu().GetAmount().(type) {
	case *workloadv1.GpuRequest_Devices:
		r.GPU = int64(a.Devices) * cluster.FullDevice
	case *workloadv1.GpuRequest_FractionMilli:
		r.GPU = int64(a.FractionMilli)
	case *workloadv1.GpuRequest_GpuMemoryBytes:
		r.GPUMemory = a.GpuMemoryBytes
	}
	return r
}

// LeadRequest is what pod 0 of a distributed training (its master) asks
// for where that differs from the workers' pods; nil otherwise.
func LeadRequest(spec *workloadv1.WorkloadSpec) *cluster.PodRequest {
	m := spec.GetDistributed().GetMaster()
	if m == nil {
		return nil
	}
	r := PodRequest(&workloadv1.WorkloadSpec{Gpu: m.GetGpu(), MilliCpu: m.GetMilliCpu(), MemoryBytes: m.GetMemoryBytes()})
	if r == PodRequest(spec) {
		return nil
	}
	return &r
}

// submitted is create_time since the Unix epoch; a missing create_time
// sorts first. time.Duration holds instants up to the year 2262.
func submitted(w *workloadv1.Workload) time.Duration {
	if w.GetCreateTime() == nil {
		return 0
	}
	return time.Duration(w.GetCreateTime().AsTime().UnixNano())
}

// EffectivePods is spec.pods with its default (0 means 1).
func EffectivePods(spec *workloadv1.WorkloadSpec) int32 { return max(spec.GetPods(), 1) }

// EffectiveMinPods is spec.min_pods with its default (0 means pods).
func EffectiveMinPods(spec *workloadv1.WorkloadSpec) int32 {
	if mp := spec.GetMinPods(); mp > 0 {
		return mp
	}
	return EffectivePods(spec)
}

// TypeName is the workload type as pkg/cluster and shared/SCHEDULING.md name
// it: "workspace", "training" or "inference"; "" for an unknown type.
func TypeName(t workloadv1.WorkloadType) string {
	switch t {
	case workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE:
		return "workspace"
	case workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING:
		return "training"
	case workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE:
		return "inference"
	}
	return ""
}

// idPattern is the id rule of every Runway resource: 1-63 characters of
// [a-z0-9-], starting with a letter (proto/README.md).
var idPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// ValidID reports whether id follows the id rule of every Runway resource.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// ParseWorkloadName splits `projects/{project}/workloads/{workload}` into
// its two ids; ok is false unless both are valid ids.
func ParseWorkloadName(name string) (project, id string, ok bool) {
	rest, found := strings.CutPrefix(name, "projects/")
	if !found {
		return "", "", false
	}
	project, id, found = strings.Cut(rest, "/workloads/")
	if !found || !ValidID(project) || !ValidID(id) {
		return "", "", false
	}
	return project, id, true
}

// NamesCredentials reports whether a spec asks for credentials' values
// (spec.credentials, a variable from a credential's key, a registry
// credential to pull its image with, a git or s3 data source's
// credential): the runtime that starts its pods opens them.
func NamesCredentials(ws *workloadv1.WorkloadSpec) bool {
	if len(ws.GetCredentials()) > 0 || ws.GetRegistryCredential() != "" {
		return true
	}
	for _, e := range ws.GetEnv() {
		if e.GetCredential() != nil {
			return true
		}
	}
	for _, m := range ws.GetDataSources() {
		if m.GetSource().GetGit().GetCredential() != "" || m.GetSource().GetS3().GetCredential() != "" {
			return true
		}
	}
	return false
}

// DefinesHostPath reports whether a spec defines a host-path data source
// itself (a one-off, or a copy it claims is resolved): that reaches the
// node, so only an account administrator may submit it (pkg/auth).
func DefinesHostPath(ws *workloadv1.WorkloadSpec) bool {
	for _, m := range ws.GetDataSources() {
		if m.GetSource().GetHostPath() != nil {
			return true
		}
	}
	return false
}
