package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/framework"
)

// A distributed training's pods find each other by name: each pod has
// hostname {workload}-master-0 or {workload}-worker-K and subdomain
// {workload}, and a headless Service of that name in the project's
// namespace, selecting the workload's pods, gives them DNS records
// ({hostname}.{workload}, resolved from the namespace's search path),
// ready or not (a framework's rendezvous starts before any pod is ready).
// The Service is owned by the pods it serves (an owner reference per pod
// created), so Kubernetes' garbage collector removes it with the last one.

// gangPod sets the distributed training's part of pod: its host name,
// subdomain and framework variables. Nothing for another workload.
func gangPod(pod *corev1.Pod, w *workloadv1.Workload, index int) error {
	id := clusterproto.ID(w.GetName())
	g, ok := clusterproto.Gang(w, clusterproto.Named(w, "."+id))
	if !ok {
		return nil
	}
	env, err := g.Env(index)
	if err != nil {
		return fmt.Errorf("distributed training %s: %w", w.GetName(), err)
	}
	pod.Spec.Hostname, pod.Spec.Subdomain = framework.Host(id, index), id
	c := &pod.Spec.Containers[0]
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
	return nil
}

// gangService makes (or completes) the headless Service of pod's workload
// and adds pod to its owners.
func (r *runtime) gangService(ctx context.Context, w *workloadv1.Workload, pod *corev1.Pod) error {
	if w.GetSpec().GetDistributed() == nil {
		return nil
	}
	id := clusterproto.ID(w.GetName())
	project := clusterproto.ID(w.GetProject())
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
	svcs := r.cfg.Kube.CoreV1().Services(pod.Namespace)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: pod.Namespace,
			Labels:          map[string]string{LabelProject: project, LabelWorkload: id, LabelManagedBy: "runway"},
			OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{LabelProject: project, LabelWorkload: id}},
	}
	_, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create the headless service %s/%s: %w", pod.Namespace, id, err)
		}
		return nil
	}
	// Pods of one gang are created at once: each adds itself, retried on
	// the others' writes.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := svcs.Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read the headless service %s/%s: %w", pod.Namespace, id, err)
		}
		if got.Labels[LabelManagedBy] != "runway" || got.Labels[LabelWorkload] != id {
			return fmt.Errorf("service %s/%s is not Runway's: the pods of %s get no names", pod.Namespace, id, w.GetName())
		}
		if slices.ContainsFunc(got.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == pod.UID }) {
			return nil
		}
		got.OwnerReferences = append(got.OwnerReferences, owner)
		_, err = svcs.Update(ctx, got, metav1.UpdateOptions{})
		return err
	})
}
