package workload

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/policy"
)

// Request rules. Every check reports the AIP-193 path of the field it
// rejects (request field names, as in CreateWorkloadRequest), and the
// checks of one request are all run, so that a client learns every bad
// field at once (apierr.Invalid).

// MaxPods is the most pods one workload may ask for (WorkloadSpec.pods).
const MaxPods = 1000

// MaxEnvBytes is the most one workload's environment may hold: the names
// and values of WorkloadSpec.env together (each pod's process gets it all).
const MaxEnvBytes = 128 << 10

// maxTTLAfterFinished bounds a finished workload's time to live: a year.
const maxTTLAfterFinished = 365 * 24 * 3600

var (
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// labelValue is a Kubernetes label value (node_type is compared with the
	// nodes' run.ai/type label).
	labelValue = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
)

// violations collects the field violations of one request.
type violations []apierr.FieldViolation

func (v *violations) add(field, description string) {
	*v = append(*v, apierr.FieldViolation{Field: field, Description: description})
}

func (v violations) err() error {
	if len(v) == 0 {
		return nil
	}
	return apierr.Invalid(v...)
}

// validateCreate checks a CreateWorkloadRequest. An unknown priority name
// alone is PRIORITY_NOT_FOUND (the reason the API documents for it); with
// other bad fields it is one more INVALID_FIELD violation, so that every
// bad field is still reported at once.
func validateCreate(req *workloadv1.CreateWorkloadRequest) error {
	var v violations
	switch _, ok := parseParent(req.GetParent(), false); {
	case req.GetParent() == AllProjects:
		v.add("parent", "must name one project; projects/- is only for listing and watching")
	case !ok:
		v.add("parent", "must be projects/{project}, where the project id "+strings.TrimPrefix(idRule, "must be "))
	}
	if !validID(req.GetWorkloadId()) {
		v.add("workload_id", idRule)
	}
	w := req.GetWorkload()
	if w == nil {
		v.add("workload", "is required: set its type and spec")
		return v.err()
	}
	validateLabels(&v, "workload.labels", w.GetLabels(), false)
	validateLabels(&v, "workload.annotations", w.GetAnnotations(), true)
	typeOK := validType(w.GetType())
	if !typeOK {
		v.add("workload.type", "must be WORKLOAD_TYPE_WORKSPACE, WORKLOAD_TYPE_TRAINING or WORKLOAD_TYPE_INFERENCE")
	}
	spec := w.GetSpec()
	if spec == nil {
		v.add("workload.spec", "is required: it must name at least an image")
		return v.err()
	}
	validateSpec(&v, "workload.spec", spec)
	validateDistributed(&v, req.GetWorkloadId(), w)
	validateServing(&v, "workload.spec", w.GetType(), spec.GetServing())
	unknownPriority := false
	if name := spec.GetPriority(); name != "" {
		p, err := cluster.PriorityByName(name)
		switch {
		case err != nil:
			unknownPriority = true
		case typeOK && !priorityAllowed(w.GetType(), p):
			v.add("workload.spec.priority", fmt.Sprintf("must be %s for a %s (or empty for %s)",
				orList(allowedPriorityNames(w.GetType())), clusterproto.TypeName(w.GetType()), cluster.DefaultPriority(clusterproto.TypeName(w.GetType())).Name))
		}
	}
	if unknownPriority {
		if len(v) == 0 {
			return apierr.NotFound(apierr.Priority, spec.GetPriority()).InField("workload.spec.priority")
		}
		v.add("workload.spec.priority", "must be one of "+orList(priorityNames(cluster.Priorities)))
	}
	return v.err()
}

// validateSpec checks the fields of a spec that do not depend on the type;
// at is the request path of the spec ("workload.spec").
func validateSpec(v *violations, at string, spec *workloadv1.WorkloadSpec) {
	if img := spec.GetImage(); img == "" {
		v.add(at+".image", "is required: name a container image such as nvcr.io/nvidia/pytorch:25.01-py3")
	} else if strings.ContainsFunc(img, isSpaceOrControl) {
		v.add(at+".image", "must be an image reference without spaces or control characters")
	}
	seen := map[string]bool{}
	envBytes := 0
	for _, e := range spec.GetEnv() {
		envBytes += len(e.GetName()) + len(e.GetValue())
	}
	if envBytes > MaxEnvBytes {
		v.add(at+".env", fmt.Sprintf("holds %d bytes of names and values; at most %d", envBytes, MaxEnvBytes))
	}
	for i, e := range spec.GetEnv() {
		field := fmt.Sprintf(at+".env[%d].name", i)
		switch {
		case !envName.MatchString(e.GetName()):
			v.add(field, "must match [A-Za-z_][A-Za-z0-9_]*")
		case seen[e.GetName()]:
			v.add(field, "must be unique; the name is set by an earlier entry")
		}
		seen[e.GetName()] = true
		if ref := e.GetCredential(); ref != nil {
			field := fmt.Sprintf(at+".env[%d]", i)
			if e.GetValue() != "" {
				v.add(field+".value", "must be empty: the value comes from the credential")
			}
			if ref.GetCredential() == "" {
				v.add(field+".credential.credential", "is required: the credential's id or name")
			}
			if ref.GetKey() == "" {
				v.add(field+".credential.key", "is required: the key of the credential")
			}
		}
	}
	validateCredentialMounts(v, at, spec.GetCredentials())
	if _, known := workloadv1.ImagePullPolicy_name[int32(spec.GetImagePullPolicy())]; !known {
		v.add(at+".image_pull_policy", "must be ALWAYS, IF_NOT_PRESENT or NEVER (unset: IF_NOT_PRESENT)")
	}
	if strings.ContainsFunc(spec.GetRegistryCredential(), isSpaceOrControl) {
		v.add(at+".registry_credential", "must be a credential's id or name")
	}
	validateDataSourceMounts(v, at, spec.GetDataSources())
	validateTools(v, at, spec.GetTools())
	if gpu := spec.GetGpu(); gpu != nil {
		validateGPU(v, at, gpu)
	}
	caps := spec.GetSecurity().GetAddCapabilities()
	if len(caps) > 64 { // Linux has 41: bounds the duplicate check below
		v.add(at+".security.add_capabilities", "must list at most 64 capabilities")
		caps = nil
	}
	for i, c := range caps {
		field := fmt.Sprintf(at+".security.add_capabilities[%d]", i)
		switch {
		case !policy.Capability(c):
			v.add(field, "must be a Linux capability in upper case without CAP_, such as NET_RAW")
		case slices.Index(caps, c) < i:
			v.add(field, "must be unique; the capability is listed earlier")
		}
	}
	if spec.GetMilliCpu() < 0 {
		v.add(at+".milli_cpu", "must be 0 or more thousandths of a core")
	}
	if ttl := spec.GetTtlAfterFinishedSeconds(); ttl < 0 || ttl > maxTTLAfterFinished {
		v.add(at+".ttl_after_finished_seconds", fmt.Sprintf("must be between 0 (kept) and %d seconds (a year)", maxTTLAfterFinished))
	}
	if spec.GetMemoryBytes() < 0 {
		v.add(at+".memory_bytes", "must be 0 or more bytes")
	}
	pods := spec.GetPods()
	if pods < 0 || pods > MaxPods {
		v.add(at+".pods", fmt.Sprintf("must be between 1 and %d (0 means 1)", MaxPods))
	}
	if mp := spec.GetMinPods(); mp < 0 || (pods >= 0 && mp > max(pods, 1)) {
		v.add(at+".min_pods", "must be between 1 and pods (0 means pods)")
	}
	pools := map[string]bool{}
	for i, np := range spec.GetNodePools() {
		field := fmt.Sprintf(at+".node_pools[%d]", i)
		id, ok := strings.CutPrefix(np, nodePoolsPrefix)
		switch {
		case !ok || !validID(id):
			v.add(field, "must be nodepools/{node_pool}, where the node pool id "+strings.TrimPrefix(idRule, "must be "))
		case pools[np]:
			v.add(field, "must be unique; the node pool is listed earlier")
		}
		pools[np] = true
	}
	if !labelValue.MatchString(spec.GetNodeType()) {
		v.add(at+".node_type", "must be a label value: at most 63 characters of [A-Za-z0-9._-], starting and ending with a letter or digit")
	}
}

// validateGPU checks that exactly one amount is set and that it is in range
// (whole devices >= 1; a fraction strictly between 0 and 1 GPU; memory > 0).
func validateGPU(v *violations, at string, gpu *workloadv1.GpuRequest) {
	switch a := gpu.GetAmount().(type) {
	case nil:
		v.add(at+".gpu", "must set exactly one of devices, fraction_milli or gpu_memory_bytes; leave gpu unset for a CPU-only pod")
	case *workloadv1.GpuRequest_Devices:
		if a.Devices < 1 {
			v.add(at+".gpu.devices", "must be 1 or more whole GPUs; use fraction_milli for part of one")
		}
	case *workloadv1.GpuRequest_FractionMilli:
		if a.FractionMilli < 1 || a.FractionMilli >= int32(cluster.FullDevice) {
			v.add(at+".gpu.fraction_milli", "must be between 1 and 999 thousandths of a GPU; use devices for whole GPUs")
		}
	case *workloadv1.GpuRequest_GpuMemoryBytes:
		if a.GpuMemoryBytes < 1 {
			v.add(at+".gpu.gpu_memory_bytes", "must be more than 0 bytes")
		}
	}
}

func validType(t workloadv1.WorkloadType) bool {
	switch t {
	case workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE,
		workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE:
		return true
	}
	return false
}

// AllowedPriorities lists the priority classes a workload type may ask for,
// highest first (shared/SCHEDULING.md §4): a workspace is interactive
// (build, or interactive-preemptible to run over quota), a training is
// batch work that can always be preempted (any preemptible class), and
// inference serves traffic, so it is never preempted (inference only).
func AllowedPriorities(t workloadv1.WorkloadType) []cluster.Priority {
	var out []cluster.Priority
	for _, p := range cluster.Priorities {
		if priorityAllowed(t, p) {
			out = append(out, p)
		}
	}
	return out
}

func priorityAllowed(t workloadv1.WorkloadType, p cluster.Priority) bool {
	switch t {
	case workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE:
		return p == cluster.PriorityBuild || p == cluster.PriorityInteractivePreemptible
	case workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING:
		return p.Preemptible
	case workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE:
		return p == cluster.PriorityInference
	}
	return false
}

func allowedPriorityNames(t workloadv1.WorkloadType) []string {
	return priorityNames(AllowedPriorities(t))
}

func priorityNames(ps []cluster.Priority) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// orList joins names as English: "a", "a or b", "a, b or c".
func orList(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func isSpaceOrControl(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

// maxCredentialMounts bounds the credentials one workload names.
const maxCredentialMounts = 16

// validateCredentialMounts checks a spec's credentials: each names one, and
// a path is absolute, clean, not the root and used once.
func validateCredentialMounts(v *violations, at string, mounts []*workloadv1.CredentialMount) {
	if len(mounts) > maxCredentialMounts {
		v.add(at+".credentials", fmt.Sprintf("must name at most %d credentials", maxCredentialMounts))
		return
	}
	paths := map[string]bool{}
	for i, m := range mounts {
		field := fmt.Sprintf(at+".credentials[%d]", i)
		if m.GetCredential() == "" {
			v.add(field+".credential", "is required: the credential's id or name")
		}
		p := m.GetPath()
		switch {
		case p == "":
		case !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" || strings.ContainsFunc(p, isSpaceOrControl) || strings.Contains(p, ":"):
			v.add(field+".path", "must be empty (environment variables) or a clean absolute directory other than /, without spaces or ':'")
		case paths[p]:
			v.add(field+".path", "must be unique; an earlier credential uses it")
		}
		paths[p] = p != ""
	}
}
