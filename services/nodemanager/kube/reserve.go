package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// Devices on Kubernetes. The scheduler places pods on a node's device
// indexes; the kubelet's device plugin hands out the physical GPUs to the
// pods that request nvidia.com/gpu. The two agree on counts, not on which
// device is which, so:
//   - a whole-GPU pod requests nvidia.com/gpu and the kubelet picks;
//   - the fractions on one device index share a reservation pod (one per
//     index, in Runway's namespace, requesting nvidia.com/gpu: 1) that owns
//     a physical GPU and reports its UUID; the fractions' pods get that
//     UUID, and the kubelet never gives that GPU to another pod;
//   - a device index is taken while any pod of Runway's naming it exists
//     (in Runway's namespace or marked in a project's, mark.go),
//     terminating ones included, so that a pod is never bound while the
//     kubelet still counts the GPU it needs as used.

// DefaultReservationImage runs the reservation pods' container when
// Config.ReservationImage is empty.
const DefaultReservationImage = "ghcr.io/runwayhq/runway:latest"

// ReservationServiceAccount is the service account of the reservation
// pods, in Runway's namespace, to report the GPU. The chart's Role lets it
// patch pods there, and the chart's ValidatingAdmissionPolicy narrows that
// to the pod its token is bound to (the kubelet mounts such a token) and
// to writing AnnotationGPUUUID once: RBAC's resourceNames cannot name pods
// made at run time. No workload's pod runs there (they run in their
// projects' namespaces, with no service account token).
const ReservationServiceAccount = "runway-gpu-reservation"

// ReservationGrace is the grace period of a reservation pod's deletion:
// its container holds a device and runs nothing.
const ReservationGrace = time.Second

// indexDevice keys Runway's pods by "kube node/device index" for each
// device they name (AnnotationDevices).
const indexDevice = "runwayDevice"

func (r *runtime) deviceKeys(p *corev1.Pod) []string {
	if p.Spec.NodeName == "" || p.Annotations[AnnotationDevices] == "" || !r.ours(p) {
		return nil
	}
	var keys []string
	for _, d := range strings.Split(p.Annotations[AnnotationDevices], ",") {
		keys = append(keys, p.Spec.NodeName+"/"+d)
	}
	return keys
}

// fractional says whether the binding shares its devices.
func fractional(b binding) bool {
	return b.FractionMilli > 0 && b.FractionMilli < 1000 && len(b.Devices) > 0
}

// holder names a pod that holds one of the binding's devices on the
// Kubernetes node, so that its pod must wait; "" when they are free. A
// fraction shares its device with the other fractions and their live
// reservation pod; anything else holds it.
func (r *runtime) holder(node string, b binding) string {
	rev := strconv.FormatInt(b.rev, 10)
	for _, d := range b.Devices {
		objs, err := r.podIdx.ByIndex(indexDevice, node+"/"+strconv.Itoa(d))
		if err != nil {
			return err.Error()
		}
		for _, o := range objs {
			p := o.(*corev1.Pod)
			switch {
			case p.Annotations[AnnotationBinding] == b.key && p.Annotations[AnnotationBindingRev] == rev:
			case fractional(b) && p.Labels[LabelReservation] != "" && p.DeletionTimestamp == nil:
			case fractional(b) && p.Annotations[AnnotationFractionMilli] != "":
			default:
				return p.Name
			}
		}
		if h := r.userHolder(node + "/" + strconv.Itoa(d)); h != "" && !fractional(b) {
			return h
		}
	}
	return ""
}

// validUUID is what a reservation pod may report: a GPU or MIG UUID (the
// device plugin's default device ids), never an index.
var validUUID = regexp.MustCompile(`^(GPU|MIG)-[A-Za-z0-9-]{1,76}$`)

// ReportGPU is what a reservation pod's container does (`runway
// reserve-gpu`): it writes the devices the device plugin gave it
// (visible, its NVIDIA_VISIBLE_DEVICES: UUIDs, comma-separated) on its own
// pod as AnnotationGPUUUID, for the runtime to give them to the fractions.
func ReportGPU(ctx context.Context, kc kubernetes.Interface, namespace, pod, visible string) error {
	uuids := strings.Split(visible, ",")
	for _, u := range uuids {
		if !validUUID.MatchString(u) {
			return fmt.Errorf("NVIDIA_VISIBLE_DEVICES=%q: want device UUIDs (GPU-… or MIG-…; the device plugin's deviceIDStrategy uuid)", visible)
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationGPUUUID: strings.Join(uuids, ",")}}})
	if _, err := kc.CoreV1().Pods(namespace).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("report GPU %s on pod %s/%s: %w", visible, namespace, pod, err)
	}
	return nil
}

// reserve makes the reservation pod of each of a fraction's devices exist
// on the Kubernetes node and returns their UUIDs; nil until every one has
// reported its UUID (its update queues the node's bindings again).
func (r *runtime) reserve(ctx context.Context, node string, b binding) ([]string, error) {
	var uuids []string
	for _, d := range b.Devices {
		name := reservationName(node, d)
		p, err := r.pods.Pods(r.cfg.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			if err := r.createReservation(ctx, node, d); err != nil {
				return nil, err
			}
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		u := p.Annotations[AnnotationGPUUUID]
		if p.DeletionTimestamp != nil || p.Spec.NodeName != node || !validUUID.MatchString(u) {
			return nil, nil
		}
		uuids = append(uuids, u)
	}
	return uuids, nil
}

func (r *runtime) createReservation(ctx context.Context, node string, d int) error {
	image := r.cfg.ReservationImage
	if image == "" {
		image = DefaultReservationImage
	}
	one := corev1.ResourceList{ResourceGPU: resource.MustParse("1")}
	fromField := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: reservationName(node, d), Namespace: r.cfg.Namespace,
			Labels:      map[string]string{LabelReservation: "true"},
			Annotations: map[string]string{AnnotationDevices: strconv.Itoa(d)}},
		Spec: corev1.PodSpec{
			// Placed by Runway outright: the device index is its decision.
			NodeName: node, SchedulerName: SchedulerName, RestartPolicy: corev1.RestartPolicyAlways,
			ServiceAccountName: ReservationServiceAccount,
			Tolerations:        r.nodeTolerations(node),
			Containers: []corev1.Container{{Name: "reserve", Image: image,
				Command: []string{"runway", "reserve-gpu"},
				Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: fromField("metadata.name")},
					{Name: "POD_NAMESPACE", ValueFrom: fromField("metadata.namespace")}},
				Resources: corev1.ResourceRequirements{Requests: one, Limits: one}}},
		},
	}
	_, err := r.cfg.Kube.CoreV1().Pods(r.cfg.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create reservation pod %s on %s: %w", pod.Name, node, err)
	}
	r.log.Info("kubernetes runtime: GPU reserved for fractions", "pod", pod.Name, "node", node, "device", d)
	return nil
}

// syncReservation deletes a reservation pod once no fraction uses its
// device: no fraction's binding names it and no fraction's pod (even a
// terminating one) is left on it.
func (r *runtime) syncReservation(ctx context.Context, p *corev1.Pod) error {
	if p.DeletionTimestamp != nil {
		return nil
	}
	key := p.Spec.NodeName + "/" + p.Annotations[AnnotationDevices]
	objs, err := r.podIdx.ByIndex(indexDevice, key)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.(*corev1.Pod).Annotations[AnnotationFractionMilli] != "" {
			return nil
		}
	}
	if r.userHolder(key) != "" {
		return nil // a user's fraction pod still uses it, in its grace period perhaps
	}
	d, err := strconv.Atoi(p.Annotations[AnnotationDevices])
	if err != nil {
		return r.deletePod(ctx, p, ReservationGrace)
	}
	if r.fractionBound(nodeID(p.Spec.NodeName), d) {
		return nil
	}
	return r.deletePod(ctx, p, ReservationGrace)
}

// fractionBound says whether a fraction's binding names the device of
// the Runway node.
func (r *runtime) fractionBound(node string, d int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.onNode[node] {
		if b := r.bindings[k]; fractional(b) && slices.Contains(b.Devices, d) {
			return true
		}
	}
	return false
}

// requeueDevices queues what a change of a pod holding devices may free or
// complete: the bindings on its node (a pod waiting for the devices, or
// for a reservation's UUID) and the reservation pods of its devices.
func (r *runtime) requeueDevices(p *corev1.Pod) { r.requeueDeviceKeys(r.deviceKeys(p)) }

// requeueDeviceKeys is requeueDevices for devices by "kube node/index".
func (r *runtime) requeueDeviceKeys(keys []string) {
	if len(keys) == 0 {
		return
	}
	for _, k := range keys {
		node, d, _ := strings.Cut(k, "/")
		if i, err := strconv.Atoi(d); err == nil {
			r.queue.Add(kindPod + ":" + r.cfg.Namespace + "/" + reservationName(node, i))
		}
	}
	node, _, _ := strings.Cut(keys[0], "/")
	id := nodeID(node)
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.onNode[id] {
		r.queue.Add(kindBinding + ":" + k)
	}
}
