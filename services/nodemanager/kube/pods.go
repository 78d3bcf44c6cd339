package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/services/nodemanager"
)

var everything = labels.Everything()

// syncBinding makes the pod of a binding exist and be bound to its node:
// the user's pod the workload was made from, else a pod created from the
// workload's spec. A deleted binding's pod is deleted (syncPod).
func (r *runtime) syncBinding(ctx context.Context, key string) error {
	b, ok := r.binding(key)
	if !ok {
		return r.syncPodsOf(ctx, key)
	}
	target, err := r.kubeNode(b.Node)
	if err == errNoNode {
		return nil // an agent's node, or one the runtime does not know (yet)
	}
	if err != nil {
		return err
	}
	pod, err := r.podOf(b)
	if err != nil || pod == nil && r.taken(ctx, b) {
		return err
	}
	if pod != nil && (pod.DeletionTimestamp != nil || pod.Spec.NodeName != "") {
		return r.syncPodsOf(ctx, key)
	}
	// The devices must be free on the node itself: a pod evicted from them
	// holds them through its grace period, and the kubelet would refuse a
	// pod that asks for them meanwhile. The holder's deletion queues this
	// binding again.
	if holder := r.holder(target, b); holder != "" {
		r.log.Debug("kubernetes runtime: binding waits for its devices", "binding", key, "held by", holder)
		return nil
	}
	var uuids []string
	if fractional(b) {
		if uuids, err = r.reserve(ctx, target, b); err != nil || uuids == nil {
			return err // nil: waiting for the reservation pods' UUIDs
		}
	}
	if pod == nil {
		if pod, err = r.createPod(ctx, b, target, uuids); err != nil || pod == nil {
			return err
		}
		if pod.DeletionTimestamp != nil || pod.Spec.NodeName != "" {
			return r.syncPodsOf(ctx, key)
		}
	} else if uuids != nil {
		// A user's pod cannot be given its GPU in its spec: it reads it
		// from the ConfigMap written now, before it is bound.
		if ok, err := r.writeUserGPU(ctx, pod, target, b, uuids); err != nil || !ok {
			return err
		}
	}
	err = r.cfg.Kube.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			Annotations: r.bindingAnnotations(pod.Namespace, pod.Name, target, key, b.rev, nil)},
		Target: corev1.ObjectReference{Kind: "Node", Name: target},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("bind pod %s/%s to %s: %w", pod.Namespace, pod.Name, target, err)
	}
	return nil
}

// bindingAnnotations name the binding a pod runs, with the pod's mark
// over them and the pod's other annotations (the Binding subresource
// copies them onto a user's pod).
func (r *runtime) bindingAnnotations(namespace, name, node, key string, rev int64, other map[string]string) map[string]string {
	srev := strconv.FormatInt(rev, 10)
	return map[string]string{AnnotationBinding: key, AnnotationBindingRev: srev,
		AnnotationMark: r.marker.mark(namespace, name, node, key, srev, other[AnnotationDevices], other[AnnotationFractionMilli])}
}

// kubeNode is the Kubernetes node of a Runway node id.
func (r *runtime) kubeNode(id string) (string, error) {
	objs, err := r.nodeIdx.ByIndex(indexNodeID, id)
	if err != nil {
		return "", err
	}
	if len(objs) == 0 {
		return "", errNoNode
	}
	return objs[0].(*corev1.Node).Name, nil
}

// podOf finds the binding's pod: a user's pod for its workload, or the
// pod created for this very binding in its project's namespace (nil when
// there is none yet, or when a pod Runway did not make has its name).
func (r *runtime) podOf(b binding) (*corev1.Pod, error) {
	objs, err := r.podIdx.ByIndex(indexForeign, b.WorkloadName())
	if err != nil {
		return nil, err
	}
	if len(objs) > 0 {
		return objs[0].(*corev1.Pod), nil
	}
	for ns, name := range map[string]string{ProjectNamespace(b.Project): r.marker.podName(b.Binding, b.rev),
		// A pod made before workloads' pods moved to their project's
		// namespace runs on in Runway's, under the name it had.
		r.cfg.Namespace: legacyPodName(b.Binding, b.rev)} {
		p, err := r.pods.Pods(ns).Get(name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		case r.ours(p):
			return p, nil
		}
	}
	return nil, nil
}

// taken says whether a pod Runway did not make has the name of the
// binding's pod (only by guessing its keyed hash): it is logged and the
// binding's pod reported failed, so that the workload is placed again
// under another name; the impostor is left to its author.
func (r *runtime) taken(ctx context.Context, b binding) bool {
	ns, name := ProjectNamespace(b.Project), r.marker.podName(b.Binding, b.rev)
	p, err := r.pods.Pods(ns).Get(name)
	if err != nil || r.ours(p) {
		return false
	}
	r.impostor(ctx, b, p)
	return true
}

// impostor logs a pod Runway did not make that has its binding's pod's
// name, and reports the binding's pod failed (once per binding).
func (r *runtime) impostor(ctx context.Context, b binding, p *corev1.Pod) {
	r.log.Warn("kubernetes runtime: a pod Runway did not make has its pod's name; not taken for Runway's",
		"pod", p.Namespace+"/"+p.Name, "binding", b.key)
	msg := fmt.Sprintf("The pod name %s/%s is taken by a pod Runway did not create (its mark does not verify).", p.Namespace, p.Name)
	if err := r.putReport(ctx, b, workloadv1.PodState_POD_STATE_FAILED, 0, msg, 0); err != nil {
		r.log.Warn("kubernetes runtime: report an impostor", "binding", b.key, "err", err)
	}
}

// syncPodsOf queues every pod that names the binding, to be brought up to
// date under its own key: a pod's reports and deletion are written by one
// worker at a time, in order.
func (r *runtime) syncPodsOf(_ context.Context, key string) error {
	objs, err := r.podIdx.ByIndex(indexBinding, key)
	if err != nil {
		return err
	}
	for _, o := range objs {
		p := o.(*corev1.Pod)
		r.queue.Add(kindPod + ":" + p.Namespace + "/" + p.Name)
	}
	return nil
}

// createPod creates the pod of a binding from its workload's spec, bound
// to its node already (one write where a create and a Binding would be
// two, which is most of what the apiserver spends per pod); nil when the
// workload is a user's pod's, which is gone.
func (r *runtime) createPod(ctx context.Context, b binding, node string, uuids []string) (*corev1.Pod, error) {
	c := etcdstore.NewCollection(r.cfg.Etcd, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	it, err := c.Get(ctx, b.Project+"/"+b.Workload)
	if err != nil {
		return nil, fmt.Errorf("read workload %s: %w", b.WorkloadName(), err)
	}
	if userPod(it.Msg.GetSpec()) != "" {
		// A user's pod is its workload's only pod: once it is gone (deleted
		// by its user) nothing replaces it, and its workload goes too.
		return nil, r.deleteForeign(ctx, b.WorkloadName())
	}
	var creds *workloadv1.ResolvePodCredentialsResponse
	if clusterproto.NamesCredentials(it.Msg.GetSpec()) {
		var retry bool
		if creds, retry, err = r.credentialsOf(ctx, b); retry {
			return nil, err
		} else if err != nil {
			// Refused (a credential deleted, a key gone): the pod fails
			// saying why rather than start without what it asked for.
			return nil, r.putReport(ctx, b, workloadv1.PodState_POD_STATE_FAILED, 0, err.Error(), 0)
		}
	}
	if msg := unmountable(it.Msg.GetSpec()); msg != "" {
		if err := r.putReport(ctx, b, workloadv1.PodState_POD_STATE_FAILED, 0, msg, 0); err != nil {
			return nil, err
		}
		return nil, nil
	}
	ns := ProjectNamespace(b.Project)
	if err := r.projectNamespace(ctx, b.Project); err != nil {
		return nil, err
	}
	name := r.marker.podName(b.Binding, b.rev)
	secrets := secretsFor(ns, name, b.Project, it.Msg.GetSpec().GetImage(), creds)
	pod := podSpec(ns, name, b, it.Msg, uuids, secrets)
	if err := gangPod(pod, it.Msg, b.Pod); err != nil {
		return nil, err
	}
	gitImage := r.cfg.GitImage
	if gitImage == "" {
		gitImage = DefaultGitImage
	}
	dataVolumes(pod, b, it.Msg.GetSpec(), gitImage)
	pod.Spec.Tolerations = slices.Concat(r.nodeTolerations(node), r.lapseTolerations())
	pod.Spec.NodeName = node
	maps.Copy(pod.Annotations, r.bindingAnnotations(ns, pod.Name, node, b.key, b.rev, pod.Annotations))
	if err := r.createSecrets(ctx, secrets); err != nil {
		return nil, err
	}
	created, err := r.cfg.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		got, err := r.cfg.Kube.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return got, err
		}
		if r.ours(got) { // created by an earlier try, whose secrets and services may not be
			if err := r.ownSecrets(ctx, secrets, got); err != nil {
				return got, err
			}
			if err := r.gangService(ctx, it.Msg, got); err != nil {
				return got, err
			}
			return got, r.ensureService(ctx, b, it.Msg, got)
		}
		r.impostor(ctx, b, got)
		return nil, nil
	case isOverQuota(err):
		// A pod of the namespace that is still terminating counts in its
		// ResourceQuota until it is gone; the quota's status follows later.
		r.log.Info("kubernetes runtime: pod waits for room in its namespace's quota", "binding", b.key, "err", err)
		r.queue.AddAfter(kindBinding+":"+b.key, quotaRetry)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("create pod %s/%s: %w", ns, pod.Name, err)
	}
	if err := r.ownSecrets(ctx, secrets, created); err != nil {
		return created, err
	}
	if err := r.gangService(ctx, it.Msg, created); err != nil {
		return nil, err
	}
	if err := r.ensureService(ctx, b, it.Msg, created); err != nil {
		return nil, err
	}
	// After the pod: a claim deleted with the workload is owned by it
	// (the kubelet starts the pod once its claims are bound).
	return created, r.createClaims(ctx, created, b, it.Msg.GetSpec())
}

// labelsOf are a workload pod's labels: the workload's own, under
// Runway's (which a workload's never shadow: the workload service refuses
// the platform's prefixes).
func labelsOf(w *workloadv1.Workload, b binding) map[string]string {
	l := maps.Clone(w.GetLabels())
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, map[string]string{LabelProject: b.Project, LabelWorkload: b.Workload, LabelPodIndex: strconv.Itoa(b.Pod)})
	return l
}

// devicesOf is a binding's devices as a pod's AnnotationDevices lists them.
func devicesOf(b binding) string {
	devs := make([]string, len(b.Devices))
	for i, d := range b.Devices {
		devs[i] = strconv.Itoa(d)
	}
	return strings.Join(devs, ",")
}

// podSpec is the pod of one gang member. Whole GPUs are requested from the
// device plugin (nvidia.com/gpu), so the kubelet hands out the devices; a
// fraction or GPU-memory request shares devices that reservation pods own
// (reserve), requests no nvidia.com/gpu (that would hold a whole one) and
// gets those devices' UUIDs (uuids) and its share in the same RUNWAY_*
// environment the local runner sets. Its credentials come from secrets
// (nil: none), by reference.
func podSpec(namespace, name string, b binding, w *workloadv1.Workload, uuids []string, secrets *podSecrets) *corev1.Pod {
	ws := clusterproto.PodSpec(w.GetSpec(), b.Pod) // a distributed training's master runs its own
	var env []corev1.EnvVar
	for _, e := range ws.GetEnv() {
		if e.GetCredential() == nil { // from the pod's Secret (podSecrets)
			env = append(env, corev1.EnvVar{Name: e.GetName(), Value: e.GetValue()})
		}
	}
	annotations := map[string]string{}
	if len(b.Devices) > 0 {
		annotations[AnnotationDevices] = devicesOf(b)
	}
	// The credentials' variables after the workload's own, and the RUNWAY_*
	// ones last (they win), as on the node agents' runtimes.
	env = append(env, secrets.envVars()...)
	env = append(env, runwayEnv(b, ws, uuids)...)
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	if ws.GetMilliCpu() > 0 {
		res.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(ws.GetMilliCpu(), resource.DecimalSI)
	}
	if ws.GetMemoryBytes() > 0 {
		res.Requests[corev1.ResourceMemory] = *resource.NewQuantity(ws.GetMemoryBytes(), resource.BinarySI)
	}
	if n := ws.GetGpu().GetDevices(); n > 0 {
		q := *resource.NewQuantity(int64(n), resource.DecimalSI)
		res.Requests[ResourceGPU], res.Limits[ResourceGPU] = q, q
	} else if len(uuids) > 0 {
		annotations[AnnotationFractionMilli] = strconv.FormatInt(b.FractionMilli, 10)
	}
	podSec, ctrSec := podSecurity(b.Project, ws.GetSecurity())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace,
			Labels:      labelsOf(w, b),
			Annotations: annotations,
		},
		Spec: corev1.PodSpec{
			SchedulerName: SchedulerName,
			RestartPolicy: corev1.RestartPolicyNever,
			// A workload gets no credentials to the API server, no namespace
			// of the node's (no hostNetwork, hostPID, hostIPC) and none of
			// root's reach (podSecurity).
			AutomountServiceAccountToken: new(false),
			SecurityContext:              podSec,
			Containers: []corev1.Container{{
				Name: "main", Image: ws.GetImage(), Command: ws.GetCommand(), Args: ws.GetArgs(),
				Env: env, Resources: res, SecurityContext: ctrSec, ImagePullPolicy: pullPolicy(ws.GetImagePullPolicy()), Ports: containerPorts(ws),
			}},
		},
	}
	secrets.apply(pod)
	return pod
}

// pullPolicy is the container's imagePullPolicy ("": Kubernetes' default
// for the tag).
func pullPolicy(p workloadv1.ImagePullPolicy) corev1.PullPolicy {
	switch p {
	case workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_ALWAYS:
		return corev1.PullAlways
	case workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_IF_NOT_PRESENT:
		return corev1.PullIfNotPresent
	case workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_NEVER:
		return corev1.PullNever
	}
	return ""
}

// runwayEnv is the environment the local runner sets for a binding's pod:
// its workload, project, index and share and, for a fraction, the physical
// devices its reservation pods were given (uuids: the device plugin does
// not hand out shares, so the pod names them itself).
func runwayEnv(b binding, ws *workloadv1.WorkloadSpec, uuids []string) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: local.EnvWorkload, Value: b.WorkloadName()},
		{Name: local.EnvProject, Value: b.Project},
		{Name: local.EnvPodIndex, Value: strconv.Itoa(b.Pod)},
		{Name: local.EnvFractionMilli, Value: strconv.FormatInt(b.FractionMilli, 10)},
		{Name: local.EnvGPUMemoryLimit, Value: strconv.FormatInt(ws.GetGpu().GetGpuMemoryBytes(), 10)},
	}
	if len(uuids) > 0 {
		env = append(env, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: strings.Join(uuids, ",")},
			corev1.EnvVar{Name: local.EnvVisibleDevices, Value: strings.Join(uuids, ",")})
	}
	return env
}

// syncPod deletes a pod whose binding is gone (evicted, its node lost, its
// workload deleted or suspended) or was made again, and reports the phase
// of a pod whose binding stands.
func (r *runtime) syncPod(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	p, err := r.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		r.releaseUserDevices(key, nil)
		return nil
	}
	if err != nil {
		return err
	}
	r.releaseUserDevices(key, p)
	if foreignWorkload(p) != "" && p.Spec.NodeName == "" {
		return r.ensureForeign(ctx, p)
	}
	if p.Namespace == r.cfg.Namespace && p.Labels[LabelReservation] != "" {
		return r.syncReservation(ctx, p)
	}
	bkey := p.Annotations[AnnotationBinding]
	if !r.ours(p) {
		// Annotations and labels are the pod's author's to write: on a pod
		// without Runway's mark they count for nothing, so no pod can
		// report, or end, another workload's state.
		if bkey != "" || p.Labels[LabelWorkload] != "" {
			r.log.Warn("kubernetes runtime: a pod with Runway's labels or annotations but not its mark; not Runway's",
				"pod", p.Namespace+"/"+p.Name, "binding", bkey)
		}
		return nil
	}
	if bkey == "" {
		return nil
	}
	b, ok := r.binding(bkey)
	if !ok || strconv.FormatInt(b.rev, 10) != p.Annotations[AnnotationBindingRev] {
		return r.deletePod(ctx, p, r.cfg.DeleteGrace)
	}
	if devs := p.Annotations[AnnotationDevices]; devs != "" && devs != devicesOf(b) {
		// Moved to other devices of its node (consolidation rewrites the
		// binding in place): the pod still holds the old ones, so it goes
		// and the binding's pod is made again on the new ones.
		r.log.Info("kubernetes runtime: pod moved on its node; made again on its new devices", "pod", p.Namespace+"/"+p.Name,
			"from", devs, "to", devicesOf(b))
		return r.deletePod(ctx, p, r.cfg.DeleteGrace)
	}
	return r.report(ctx, b, p)
}

func (r *runtime) deletePod(ctx context.Context, p *corev1.Pod, after time.Duration) error {
	if p.DeletionTimestamp != nil {
		return nil
	}
	if err := r.deleteSecrets(ctx, p); err != nil {
		return err
	}
	grace := int64(after.Seconds())
	err := r.cfg.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	r.log.Info("kubernetes runtime: pod deleted, what it ran for is gone", "pod", p.Namespace+"/"+p.Name,
		"grace", after)
	return nil
}

// report writes the pod's phase as the binding's run report, as an agent
// does, when it changed.
func (r *runtime) report(ctx context.Context, b binding, p *corev1.Pod) error {
	state, code, msg := stateOf(p)
	// The node agent's findings (agent.KubeMode): the newest signed ones;
	// a forged, stale or removed annotation leaves the last that counted.
	seen := b.key + "@" + strconv.FormatInt(b.rev, 10)
	r.mu.Lock()
	found := r.agentFound[seen]
	ended, idle, at, ok := r.marker.agentReport(p)
	if ok && at > found.at {
		found = agentFound{ended: ended, idle: idle, at: at}
		r.agentFound[seen] = found
	}
	r.mu.Unlock()
	if !ok && p.Annotations[AnnotationAgentReportMAC] != "" {
		r.log.Warn("kubernetes runtime: findings on a pod not signed with the key of its node; not counted",
			"pod", p.Namespace+"/"+p.Name, "node", p.Spec.NodeName)
	}
	if found.ended != "" && state != workloadv1.PodState_POD_STATE_SUCCEEDED {
		state, code, msg = workloadv1.PodState_POD_STATE_FAILED, 128+9, found.ended // killed by SIGKILL
	}
	var ports []*workloadv1.PortBinding
	if state == workloadv1.PodState_POD_STATE_RUNNING {
		ports = r.toolPorts(ctx, b, p)
	}
	return r.putReport(ctx, b, state, code, msg, found.idle, ports...)
}

// agentFound is what the node agent last reported of a pod, signed.
type agentFound struct {
	ended string
	idle  time.Duration
	at    int64 // when the agent wrote it, Unix nanoseconds
}

// putReport writes the binding's run report unless it says that already.
func (r *runtime) putReport(ctx context.Context, b binding, state workloadv1.PodState, code int32, msg string, idle time.Duration,
	ports ...*workloadv1.PortBinding) error {
	if len(msg) > 1024 {
		msg = strings.ToValidUTF8(msg[:1024], "")
	}
	now := runReport{state: state, msg: msg, idle: idle, ports: len(ports)}
	seen := b.key + "@" + strconv.FormatInt(b.rev, 10)
	r.mu.Lock()
	last := r.reported[seen]
	r.mu.Unlock()
	if state == workloadv1.PodState_POD_STATE_UNSPECIFIED || last == now ||
		last.state == state && state != workloadv1.PodState_POD_STATE_RUNNING && last.msg == msg {
		return nil
	}
	err := nodemanager.PutRun(ctx, r.cfg.Etcd, &nodemanagerv1.ReportWorkloadStateRequest{
		Node: nodemanager.NodeName(b.Node), Workload: b.WorkloadName(), PodIndex: int32(b.Pod),
		State: state, ExitCode: code, Message: msg, ObserveTime: timestamppb.Now(), GpuIdleTime: durationpb.New(idle),
		Ports: ports,
	})
	if err != nil {
		return fmt.Errorf("run report of %s: %w", b.key, err)
	}
	r.mu.Lock()
	r.reported[seen] = now
	r.mu.Unlock()
	return nil
}

// runReport is what was last reported of a pod: a pod is reported again
// when its state, its message or (running) its GPU idle time changes.
type runReport struct {
	state workloadv1.PodState
	msg   string
	idle  time.Duration
	ports int // tool ports found (a Service read that failed is tried again)
}

// stateOf maps a bound pod's phase to a run report's state; UNSPECIFIED
// when there is nothing to report yet (Pending: the binding already says
// BOUND).
func stateOf(p *corev1.Pod) (workloadv1.PodState, int32, string) {
	if p.Spec.NodeName == "" {
		return workloadv1.PodState_POD_STATE_UNSPECIFIED, 0, ""
	}
	switch p.Status.Phase {
	case corev1.PodRunning:
		return workloadv1.PodState_POD_STATE_RUNNING, 0, cloneNotes(p)
	case corev1.PodSucceeded:
		return workloadv1.PodState_POD_STATE_SUCCEEDED, 0, cloneNotes(p)
	case corev1.PodFailed:
		code, msg := int32(0), p.Status.Message
		// A clone that failed ended the pod before its container started.
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				code = t.ExitCode
				if msg == "" {
					msg = t.Reason + ": " + t.Message
				}
				break
			}
		}
		if msg == "" {
			msg = p.Status.Reason
		}
		return workloadv1.PodState_POD_STATE_FAILED, code, msg
	}
	return workloadv1.PodState_POD_STATE_UNSPECIFIED, 0, ""
}
