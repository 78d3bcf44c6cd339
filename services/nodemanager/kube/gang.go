package kube

import (
	"context"
	"fmt"
	"path"
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
// An MPI training's pods mount its hostfile from a ConfigMap
// ({workload}-mpi-hostfile) at framework.HostfilePath. Both are owned by
// the pods they serve (an owner reference per pod created), so Kubernetes'
// garbage collector removes them with the last one.

// hostfileVolume is the volume of an MPI pod's hostfile.
const hostfileVolume = "mpi-hostfile"

func hostfileConfigMap(id string) string { return id + "-mpi-hostfile" }

// gangPod sets the distributed training's part of pod: its host name,
// subdomain and framework variables, and an MPI pod's hostfile volume.
// Nothing for another workload.
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
	if g.Kind == framework.MPI {
		dir, file := path.Split(framework.HostfilePath)
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: hostfileVolume, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: hostfileConfigMap(id)},
				Items: []corev1.KeyToPath{{Key: file, Path: file}}}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: hostfileVolume, MountPath: strings.TrimSuffix(dir, "/"), ReadOnly: true})
	}
	return nil
}

// gangService makes (or completes) the headless Service of pod's workload,
// and an MPI training's hostfile ConfigMap, and adds pod to their owners.
func (r *runtime) gangService(ctx context.Context, w *workloadv1.Workload, pod *corev1.Pod) error {
	if w.GetSpec().GetDistributed() == nil {
		return nil
	}
	id, project := clusterproto.ID(w.GetName()), clusterproto.ID(w.GetProject())
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: pod.Namespace,
			Labels:          map[string]string{LabelProject: project, LabelWorkload: id, LabelManagedBy: "runway"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}}
	}
	svcs := r.cfg.Kube.CoreV1().Services(pod.Namespace)
	svc := &corev1.Service{ObjectMeta: meta(id),
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{LabelProject: project, LabelWorkload: id}}}
	if err := ownGang(ctx, pod, id, w.GetName(), "service",
		func() error { _, err := svcs.Create(ctx, svc, metav1.CreateOptions{}); return err },
		func() (metav1.Object, error) { return svcs.Get(ctx, svc.Name, metav1.GetOptions{}) },
		func(o metav1.Object) error {
			_, err := svcs.Update(ctx, o.(*corev1.Service), metav1.UpdateOptions{})
			return err
		},
	); err != nil {
		return err
	}
	g, _ := clusterproto.Gang(w, clusterproto.Named(w, "."+id))
	if g.Kind != framework.MPI {
		return nil
	}
	cms := r.cfg.Kube.CoreV1().ConfigMaps(pod.Namespace)
	cm := &corev1.ConfigMap{ObjectMeta: meta(hostfileConfigMap(id)),
		Data: map[string]string{path.Base(framework.HostfilePath): string(g.Hostfile())}}
	return ownGang(ctx, pod, id, w.GetName(), "hostfile",
		func() error { _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); return err },
		func() (metav1.Object, error) { return cms.Get(ctx, cm.Name, metav1.GetOptions{}) },
		func(o metav1.Object) error {
			_, err := cms.Update(ctx, o.(*corev1.ConfigMap), metav1.UpdateOptions{})
			return err
		},
	)
}

// ownGang creates a gang's object owned by pod or, when it is there, adds
// pod to its owners: the pods of one gang are created at once, so the
// update is retried on the others' writes. An object of that name that is
// not Runway's (of this workload) is an error: the pods get no names.
func ownGang(ctx context.Context, pod *corev1.Pod, id, workload, what string,
	create func() error, get func() (metav1.Object, error), update func(metav1.Object) error) error {
	err := create()
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the %s of %s in %s: %w", what, workload, pod.Namespace, err)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, err := get()
		if err != nil {
			return fmt.Errorf("read the %s of %s in %s: %w", what, workload, pod.Namespace, err)
		}
		if o.GetLabels()[LabelManagedBy] != "runway" || o.GetLabels()[LabelWorkload] != id {
			return fmt.Errorf("%s %s/%s is not Runway's: the pods of %s do without", what, pod.Namespace, o.GetName(), workload)
		}
		owners := o.GetOwnerReferences()
		if slices.ContainsFunc(owners, func(r metav1.OwnerReference) bool { return r.UID == pod.UID }) {
			return nil
		}
		o.SetOwnerReferences(append(owners, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}))
		return update(o)
	})
}
