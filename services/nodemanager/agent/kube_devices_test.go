package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// A fraction's GPU is the one its reservation pod reports for the device
// its marked annotation names, never what the pod's own environment says:
// a copy of the pod (the mark does not cover the spec) could name another
// tenant's GPU there and be time-sliced with it.
func TestReservedUUIDs(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	reservation := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "runway", Name: kube.ReservationName("n1", 1),
		Annotations: map[string]string{kube.AnnotationGPUUUID: "GPU-reserved"}}}
	if err := store.Add(reservation); err != nil {
		t.Fatal(err)
	}
	a := &kubeAgent{km: KubeMode{Namespace: "runway"}, store: store}
	pod := func(devices string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "runway-a", Name: "f-0-1a2b3c4d",
			Annotations: map[string]string{kube.AnnotationDevices: devices}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "main",
				Env: []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "GPU-another-tenants"}}}}}}
	}
	if got := a.reservedUUIDs(pod("1")); len(got) != 1 || got[0] != "GPU-reserved" {
		t.Errorf("reservedUUIDs = %v, want the reservation's [GPU-reserved]", got)
	}
	for _, devices := range []string{"0", "", "1,x"} {
		if got := a.reservedUUIDs(pod(devices)); got != nil {
			t.Errorf("devices %q: reservedUUIDs = %v, want none (no reservation reported it)", devices, got)
		}
	}
}
