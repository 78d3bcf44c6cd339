package kube

import (
	"context"
	"fmt"
	"strings"
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// A workload with tools (WorkloadSpec.tools) or an inference endpoint
// (WorkloadSpec.serving) gets a Service in its
// project's namespace, named after the workload, whose ports are its
// tools' and whose selector is its pods' labels: the tool proxy dials its
// ClusterIP (the run report's PortBinding), and nothing else is published
// (no NodePort, no LoadBalancer). Each of the workload's pods owns it, so
// the garbage collector deletes it with the last of them.

// servingPortName names an inference endpoint's Service port (the
// workload service lets no tool take it).
const servingPortName = "serving"

// servicePorts are the Service ports of a workload's tools and its
// inference endpoint.
func servicePorts(ws *workloadv1.WorkloadSpec) []corev1.ServicePort {
	var ports []corev1.ServicePort
	seen := map[int32]bool{}
	add := func(name string, port int32) {
		if !seen[port] {
			seen[port] = true
			ports = append(ports, corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port)})
		}
	}
	for _, t := range ws.GetTools() {
		add(t.GetName(), t.GetPort())
	}
	if sv := ws.GetServing(); sv != nil {
		add(servingPortName, sv.GetPort())
	}
	return ports
}

// ToolsServiceName is the name of the Service of a workload's tools:
// apart from the headless Service a distributed training's pods find each
// other by (named after the workload), cut to a DNS label.
func ToolsServiceName(workload string) string {
	n := "tools-" + workload
	if len(n) > 63 {
		n = strings.TrimRight(n[:63], "-")
	}
	return n
}

// ensureService writes the tools' Service of pod's workload, owned (also)
// by pod.
func (r *runtime) ensureService(ctx context.Context, b binding, w *workloadv1.Workload, pod *corev1.Pod) error {
	ports := servicePorts(w.GetSpec())
	if len(ports) == 0 || pod == nil {
		return nil
	}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}
	svcs := r.cfg.Kube.CoreV1().Services(pod.Namespace)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ToolsServiceName(b.Workload), Namespace: pod.Namespace,
			Labels:          map[string]string{LabelProject: b.Project, LabelWorkload: b.Workload},
			OwnerReferences: []metav1.OwnerReference{owner}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports,
			Selector: map[string]string{LabelProject: b.Project, LabelWorkload: b.Workload}},
	}
	_, err := svcs.Create(ctx, svc, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("create service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		return nil
	}
	got, err := svcs.Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("read service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if got.Labels[LabelWorkload] != b.Workload || got.Labels[LabelProject] != b.Project {
		return fmt.Errorf("service %s/%s is not Runway's (no %s=%s label): the workload's tools are not published",
			svc.Namespace, svc.Name, LabelWorkload, b.Workload)
	}
	if slices.ContainsFunc(got.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == pod.UID }) {
		return nil
	}
	got.OwnerReferences = append(got.OwnerReferences, owner)
	if _, err := svcs.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// toolPorts are where a running pod's tools are reached: its workload's
// Service's ClusterIP and each port; none when it has no Service.
func (r *runtime) toolPorts(ctx context.Context, b binding, p *corev1.Pod) []*workloadv1.PortBinding {
	svc, err := r.cfg.Kube.CoreV1().Services(p.Namespace).Get(ctx, ToolsServiceName(b.Workload), metav1.GetOptions{})
	if err != nil || svc.Labels[LabelWorkload] != b.Workload || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	var out []*workloadv1.PortBinding
	for _, port := range svc.Spec.Ports {
		out = append(out, &workloadv1.PortBinding{ContainerPort: port.TargetPort.IntVal,
			Address: net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(port.Port)))})
	}
	return out
}

// containerPorts declare a pod's tool and serving ports on its container.
func containerPorts(ws *workloadv1.WorkloadSpec) []corev1.ContainerPort {
	var ports []corev1.ContainerPort
	for _, p := range servicePorts(ws) {
		ports = append(ports, corev1.ContainerPort{Name: p.Name, ContainerPort: p.Port, Protocol: corev1.ProtocolTCP})
	}
	return ports
}
