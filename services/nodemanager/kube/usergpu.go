package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// A user's pod that asks for a GPU fraction shares a physical GPU that a
// reservation pod owns, as Runway's own fraction pods do, but its spec was
// written by its user and cannot change once created: it cannot be given
// the GPU's UUID in its environment. So it takes its environment from a
// ConfigMap that Runway writes in the pod's namespace at binding, before
// the pod is bound:
//
//	envFrom:
//	  - configMapRef: {name: <pod>-runway-gpu}
//
// in every container, not optional, so that the kubelet starts no
// container before the ConfigMap is there. The ConfigMap holds
// NVIDIA_VISIBLE_DEVICES (the reservation's UUID) and the RUNWAY_*
// variables of the local runner, and is owned by the pod, so it goes with
// it. A fraction's pod without that reference in every container is not
// scheduled (an event on the pod says why): without it a container would
// see what its image says (CUDA images say NVIDIA_VISIBLE_DEVICES=all).
// The admission webhook (webhook.go) adds the reference to pods that lack
// it, under a name of its choosing for pods whose name is generated.

// UserGPUConfigMap is the ConfigMap a user's fraction pod named pod reads
// its GPU from, unless AnnotationGPUConfigMap names another.
func UserGPUConfigMap(pod string) string { return pod + "-runway-gpu" }

// AnnotationGPUConfigMap on a user's fraction pod names the ConfigMap it
// reads its GPU from: the admission webhook (webhook.go) sets it on pods
// whose name is generated, which no template can name in advance.
const AnnotationGPUConfigMap = "runway.io/gpu-configmap"

// gpuConfigMap is the ConfigMap a user's fraction pod reads its GPU from.
func gpuConfigMap(p *corev1.Pod) string {
	if n := p.Annotations[AnnotationGPUConfigMap]; n != "" {
		return n
	}
	return UserGPUConfigMap(p.Name)
}

// EventReasonNoGPUConfigMap is the reason of the event on a user's
// fraction pod that does not read its GPU from UserGPUConfigMap.
const EventReasonNoGPUConfigMap = "RunwayFractionNeedsGPUConfigMap"

// checkUserGPU says why a user's fraction pod cannot be given its GPU; nil
// when every container reads UserGPUConfigMap.
func checkUserGPU(p *corev1.Pod) error {
	name := gpuConfigMap(p)
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("a pod asking for a GPU fraction reads its GPU from the ConfigMap %q, which is no ConfigMap name: %s",
			name, strings.Join(errs, "; "))
	}
	for _, c := range p.Spec.Containers {
		if !readsConfigMap(c, name) {
			return fmt.Errorf("a pod asking for a GPU fraction takes its GPU from the ConfigMap Runway writes at binding: "+
				"container %q needs envFrom: [{configMapRef: {name: %s}}] (not optional)", c.Name, name)
		}
	}
	return nil
}

func readsConfigMap(c corev1.Container, name string) bool {
	for _, e := range c.EnvFrom {
		if r := e.ConfigMapRef; r != nil && r.Name == name && e.Prefix == "" && (r.Optional == nil || !*r.Optional) {
			return true
		}
	}
	return false
}

// refuseUserGPU records on the pod why Runway does not schedule it.
func (r *runtime) refuseUserGPU(ctx context.Context, p *corev1.Pod, why error) {
	r.log.Warn("kubernetes runtime: pod cannot be scheduled", "pod", p.Namespace+"/"+p.Name, "err", why)
	now := metav1.Now()
	_, err := r.cfg.Kube.CoreV1().Events(p.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name,
			UID: p.UID, ResourceVersion: p.ResourceVersion},
		Reason: EventReasonNoGPUConfigMap, Message: why.Error(), Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: SchedulerName},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}, metav1.CreateOptions{})
	if err != nil {
		r.log.Warn("kubernetes runtime: event not recorded", "pod", p.Namespace+"/"+p.Name, "err", err)
	}
}

// writeUserGPU writes a user's fraction pod's ConfigMap with its devices
// (uuids) and RUNWAY_* variables, and holds the devices on node for it;
// false (and nothing bound) for a pod that does not read it.
func (r *runtime) writeUserGPU(ctx context.Context, p *corev1.Pod, node string, b binding, uuids []string) (bool, error) {
	if foreignWorkload(p) == "" {
		return true, nil
	}
	if err := checkUserGPU(p); err != nil {
		r.log.Warn("kubernetes runtime: pod not bound", "pod", p.Namespace+"/"+p.Name, "err", err)
		return false, nil
	}
	c := etcdstore.NewCollection(r.cfg.Etcd, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	it, err := c.Get(ctx, b.Project+"/"+b.Workload)
	if err != nil {
		return false, fmt.Errorf("read workload %s: %w", b.WorkloadName(), err)
	}
	data := map[string]string{}
	for _, e := range runwayEnv(b, it.Msg.GetSpec(), uuids) {
		data[e.Name] = e.Value
	}
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: gpuConfigMap(p), Namespace: p.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}}},
		Data: data,
	}
	cms := r.cfg.Kube.CoreV1().ConfigMaps(p.Namespace)
	_, err = cms.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// Written before for this pod (a retried binding): what Runway
		// decided replaces it. Any other ConfigMap of that name (an
		// admin's, kube-root-ca.crt, another pod's) is never taken over:
		// the pod names it, and the pod is its user's to write.
		cur, gerr := cms.Get(ctx, want.Name, metav1.GetOptions{})
		if gerr != nil {
			return false, fmt.Errorf("read ConfigMap %s/%s: %w", p.Namespace, want.Name, gerr)
		}
		if !ownedBy(cur, p) {
			r.log.Warn("kubernetes runtime: pod not bound: its GPU ConfigMap exists and is not Runway's for this pod",
				"pod", p.Namespace+"/"+p.Name, "configmap", want.Name)
			return false, nil
		}
		if maps.Equal(cur.Data, want.Data) && len(cur.BinaryData) == 0 {
			return true, nil
		}
		want.ResourceVersion = cur.ResourceVersion
		_, err = cms.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return false, fmt.Errorf("write ConfigMap %s/%s: %w", p.Namespace, want.Name, err)
	}
	r.holdUserDevices(p, node, b.Devices)
	return true, nil
}

// userHold is what a user's fraction pod that Runway bound uses: its
// devices ("kube node/index"). Its annotations are its user's to write, so
// they do not say (deviceKeys counts only Runway's namespace); Runway
// remembers, from the pod's binding until the pod is gone, so that a
// reservation outlives an evicted pod's grace period and no whole-GPU pod
// is placed on the device meanwhile. A restarted runtime knows the devices
// of the pods whose bindings stand (fractionBound), not those of pods
// already terminating.
type userHold struct {
	uid  types.UID
	keys []string
}

func (r *runtime) holdUserDevices(p *corev1.Pod, node string, devices []int) {
	h := userHold{uid: p.UID}
	for _, d := range devices {
		h.keys = append(h.keys, node+"/"+strconv.Itoa(d))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.userHolds == nil {
		r.userHolds = map[string]userHold{}
	}
	r.userHolds[p.Namespace+"/"+p.Name] = h
}

// releaseUserDevices forgets the devices of the pod at key once it is gone
// (p nil, or another pod of that name) or was never bound and no binding
// is left for it, and queues what waited for them.
func (r *runtime) releaseUserDevices(key string, p *corev1.Pod) {
	r.mu.Lock()
	h, ok := r.userHolds[key]
	gone := ok && (p == nil || p.UID != h.uid || p.Spec.NodeName == "" && !r.workloadBound(foreignWorkload(p)))
	if gone {
		delete(r.userHolds, key)
	}
	r.mu.Unlock()
	if gone {
		r.requeueDeviceKeys(h.keys)
	}
}

// workloadBound says whether a binding names the workload; under mu.
func (r *runtime) workloadBound(name string) bool {
	for _, b := range r.bindings {
		if b.WorkloadName() == name {
			return true
		}
	}
	return false
}

// userHolder is the key of a user's pod that uses the device ("kube
// node/index"); "" when none does.
func (r *runtime) userHolder(device string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, h := range r.userHolds {
		if slices.Contains(h.keys, device) {
			return k
		}
	}
	return ""
}

func ownedBy(cm *corev1.ConfigMap, p *corev1.Pod) bool {
	return len(cm.OwnerReferences) == 1 && cm.OwnerReferences[0].UID == p.UID
}
