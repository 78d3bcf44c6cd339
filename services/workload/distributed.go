package workload

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/policy"
)

// maxBackoffLimit bounds spec.distributed.backoff_limit.
const maxBackoffLimit = 100

// validateDistributed checks spec.distributed of a create request: a
// training only, a master and at least one worker, a gang of all pods
// except for elastic PyTorch, and pod names (`{id}-worker-{n}`) that are
// DNS labels, since the runtimes name the pods' hosts by them.
func validateDistributed(v *violations, id string, w *workloadv1.Workload) {
	d := w.GetSpec().GetDistributed()
	if d == nil {
		return
	}
	const at = "workload.spec.distributed"
	if w.GetType() != workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING {
		v.add(at, "is for trainings only (type WORKLOAD_TYPE_TRAINING)")
	}
	fw := d.GetFramework()
	if _, ok := workloadv1.Framework_name[int32(fw)]; !ok || fw == workloadv1.Framework_FRAMEWORK_UNSPECIFIED {
		v.add(at+".framework", "must be FRAMEWORK_PYTORCH, FRAMEWORK_MPI, FRAMEWORK_TENSORFLOW, FRAMEWORK_JAX or FRAMEWORK_XGBOOST")
	}
	spec := w.GetSpec()
	pods := spec.GetPods()
	if pods < 2 {
		v.add("workload.spec.pods", "must be 2 or more for a distributed training: the master (pod 0) and at least one worker")
	}
	if mp := spec.GetMinPods(); mp != 0 && mp != pods {
		switch {
		case fw != workloadv1.Framework_FRAMEWORK_PYTORCH:
			v.add("workload.spec.min_pods", "must be pods (or 0): only a PyTorch training may be elastic")
		case mp < 2:
			v.add("workload.spec.min_pods", "must be 2 or more: the master and at least one worker")
		}
	}
	if longest := len(id) + len("-worker-") + len(strconv.Itoa(int(max(pods, 1))-1)); longest > 63 {
		v.add("workload_id", fmt.Sprintf("must be at most %d characters for a distributed training of %d pods: its pods' host names (%s-worker-N) are DNS labels of at most 63", len(id)-(longest-63), pods, id))
	}
	if _, ok := workloadv1.RestartPolicy_name[int32(d.GetRestartPolicy())]; !ok {
		v.add(at+".restart_policy", "must be RESTART_POLICY_NEVER or RESTART_POLICY_ON_FAILURE")
	}
	if b := d.GetBackoffLimit(); b < 0 || b > maxBackoffLimit {
		v.add(at+".backoff_limit", fmt.Sprintf("must be between 0 (6) and %d restarts", maxBackoffLimit))
	}
	if m := d.GetMaster(); m != nil {
		// The master's fields obey the workers' rules.
		validateSpec(v, at+".master", &workloadv1.WorkloadSpec{Image: masterImage(spec), Gpu: m.GetGpu(),
			MilliCpu: m.GetMilliCpu(), MemoryBytes: m.GetMemoryBytes()})
	}
}

// masterImage is the master's image: its own, or the workers'.
func masterImage(spec *workloadv1.WorkloadSpec) string {
	if img := spec.GetDistributed().GetMaster().GetImage(); img != "" {
		return img
	}
	return spec.GetImage()
}

// BackoffLimit is spec.distributed.backoff_limit with its default.
func BackoffLimit(d *workloadv1.DistributedSpec) int32 {
	if b := d.GetBackoffLimit(); b > 0 {
		return b
	}
	return 6
}

// gangFailed acts on a pod of a distributed training that failed while
// the others may still hold their GPUs, as its restart policy says, and
// reports whether it did. NEVER (the default) fails the workload at once:
// FINISHED with a failed pod makes it FAILED, final, and the scheduler
// deletes every binding it has left, so its other pods are stopped.
// ON_FAILURE, below the backoff limit, stops the whole gang to start it
// again: spec.suspended with requeue_on_release, as a preemption by the
// controller, so that once every pod is released it is PENDING and placed
// whole again; at the limit it fails as NEVER does.
func gangFailed(w *workloadv1.Workload, pods []*workloadv1.PodStatus, now time.Time) bool {
	d := w.GetSpec().GetDistributed()
	if d == nil || w.GetSpec().GetSuspended() {
		return false
	}
	i := slices.IndexFunc(pods, func(p *workloadv1.PodStatus) bool { return p.GetState() == workloadv1.PodState_POD_STATE_FAILED })
	if i < 0 {
		return false
	}
	p, st := pods[i], w.GetStatus()
	why := fmt.Sprintf("Pod %d failed (exit code %d)", p.GetIndex(), p.GetExitCode())
	if p.GetMessage() != "" {
		why += ": " + p.GetMessage()
	}
	limit := BackoffLimit(d)
	if d.GetRestartPolicy() == workloadv1.RestartPolicy_RESTART_POLICY_ON_FAILURE {
		if st.GetGangRestarts() < limit {
			st.GangRestarts++
			w.Spec.Suspended, st.RequeueOnRelease = true, true
			Fold(w, NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_GANG_RESTARTED, now,
				fmt.Sprintf("%s; every pod is stopped and the gang started again (restart %d of %d).", why, st.GetGangRestarts(), limit)))
			return true
		}
		why += fmt.Sprintf("; the backoff limit of %d restarts is reached", limit)
	}
	Fold(w, NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_FINISHED, now, why+"; the other pods are stopped."))
	return true
}

// masterPodFields are the fields of a pod that a distributed training's
// master has of its own (MasterSpec), by proto path.
var masterPodFields = []string{"image", "command", "args", "gpu", "milli_cpu", "memory_bytes"}

// masterViolations checks a distributed training's master pod against the
// policy's rules on a pod's fields, as its workers are: a rule on image or
// gpu.devices holds for every pod, so the master is no way around it.
// Violations name the master's field (workload.spec.distributed.master.*).
func masterViolations(eff *policy.Effective, submitted, final *workloadv1.WorkloadSpec) []policy.Violation {
	if final.GetDistributed().GetMaster() == nil {
		return nil
	}
	const at = "workload.spec.distributed.master."
	var out []policy.Violation
	for _, pv := range eff.Check(at, clusterproto.PodSpec(submitted, 0), clusterproto.PodSpec(final, 0)) {
		name := strings.TrimPrefix(pv.Field, at)
		if slices.ContainsFunc(masterPodFields, func(f string) bool { return name == f || strings.HasPrefix(name, f+".") }) {
			out = append(out, pv)
		}
	}
	return out
}

// gangRestarting reports whether the controller's requeue in progress is a
// gang restart (counted in gang_restarts, not as a preemption): the last
// event that set requeue_on_release is GANG_RESTARTED, not LIMIT_REACHED.
func gangRestarting(st *workloadv1.WorkloadStatus) bool {
	for _, ev := range slices.Backward(st.GetEvents()) {
		switch ev.GetType() {
		case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_GANG_RESTARTED:
			return true
		case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_LIMIT_REACHED:
			return false
		}
	}
	return false
}
