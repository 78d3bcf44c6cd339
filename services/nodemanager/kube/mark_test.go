package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestMarked: a mark verifies only on the pod it was made for; a copy of
// a marked pod under another name, namespace or node, with other devices,
// asking for more GPUs than its devices, or marked under another key, is
// not Runway's.
func TestMarked(t *testing.T) {
	m := marker{key: []byte("0123456789abcdef0123456789abcdef")}
	pod := func() *corev1.Pod {
		gpu := corev1.ResourceList{ResourceGPU: resource.MustParse("1")}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "train-0-1a2b3c4d", Namespace: "runway-team-a",
				Annotations: map[string]string{AnnotationBinding: "n1/team-a.train.0", AnnotationBindingRev: "42", AnnotationDevices: "1"}},
			Spec: corev1.PodSpec{NodeName: "n1", SchedulerName: SchedulerName,
				Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}}},
		}
		a := p.Annotations
		a[AnnotationMark] = m.mark(p.Namespace, p.Name, p.Spec.NodeName, a[AnnotationBinding], a[AnnotationBindingRev], a[AnnotationDevices], "")
		return p
	}
	if !m.marked(pod()) {
		t.Fatal("the pod the mark was made for is not marked")
	}
	for name, forge := range map[string]func(p *corev1.Pod){
		"no mark":           func(p *corev1.Pod) { delete(p.Annotations, AnnotationMark) },
		"another name":      func(p *corev1.Pod) { p.Name = "copycat" },
		"another namespace": func(p *corev1.Pod) { p.Namespace = "runway-team-b" },
		"another node":      func(p *corev1.Pod) { p.Spec.NodeName = "n2" },
		"unbound":           func(p *corev1.Pod) { p.Spec.NodeName = "" },
		"another binding":   func(p *corev1.Pod) { p.Annotations[AnnotationBinding] = "n1/team-a.other.0" },
		"another revision":  func(p *corev1.Pod) { p.Annotations[AnnotationBindingRev] = "43" },
		"other devices":     func(p *corev1.Pod) { p.Annotations[AnnotationDevices] = "0,1" },
		"called a fraction": func(p *corev1.Pod) { p.Annotations[AnnotationFractionMilli] = "500" },
		"more GPUs": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits[ResourceGPU] = resource.MustParse("2")
			p.Spec.Containers[0].Resources.Requests[ResourceGPU] = resource.MustParse("2")
		},
		"a second container with GPUs": func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
		},
	} {
		p := pod()
		forge(p)
		if m.marked(p) {
			t.Errorf("%s: taken for Runway's pod", name)
		}
	}
	if (marker{key: []byte("another key, another runway.....")}).marked(pod()) {
		t.Error("a mark made under another key verifies")
	}
}
