package kube

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The webhook adds the GPU ConfigMap's reference to each container of a
// user's fraction pod that lacks it, and to no other pod.
func TestGPUConfigMapPatch(t *testing.T) {
	ref := func(name string) corev1.EnvFromSource {
		return corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
	}
	pod := func(ns string, annotations map[string]string, containers ...corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: ns, Annotations: annotations},
			Spec: corev1.PodSpec{SchedulerName: SchedulerName, Containers: containers}}
	}
	frac := map[string]string{AnnotationGPUFraction: "0.5"}
	for _, c := range []struct {
		what string
		pod  *corev1.Pod
		want string // the patch as JSON; "null" for none
	}{
		{"a named pod", pod("runway-a", frac, corev1.Container{Name: "main"}, corev1.Container{Name: "side", EnvFrom: []corev1.EnvFromSource{ref("other")}}),
			`[{"op":"add","path":"/spec/containers/0/envFrom","value":[{"configMapRef":{"name":"nb-runway-gpu"}}]},` +
				`{"op":"add","path":"/spec/containers/1/envFrom/-","value":{"configMapRef":{"name":"nb-runway-gpu"}}}]`},
		{"a pod that reads it", pod("runway-a", frac, corev1.Container{Name: "main", EnvFrom: []corev1.EnvFromSource{ref("nb-runway-gpu")}}), "null"},
		{"a whole-GPU pod", pod("runway-a", nil, corev1.Container{Name: "main"}), "null"},
		{"a pod outside a project's namespace", pod("default", frac, corev1.Container{Name: "main"}), "null"},
	} {
		b, _ := json.Marshal(gpuConfigMapPatch(c.pod))
		if string(b) != c.want {
			t.Errorf("%s: patch %s, want %s", c.what, b, c.want)
		}
	}
}
