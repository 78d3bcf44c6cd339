package kube_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// TestReservationPodPatchesOnlyItself: with the chart's service account,
// Role and admission policy for the GPU reservation pods, the credentials
// of one reservation pod (a token bound to it, as the kubelet mounts it)
// write its own GPU annotation, once, and nothing else: not another pod's,
// not its own labels or spec, not another namespace's pods, and they read
// and create no pod.
func TestReservationPodPatchesOnlyItself(t *testing.T) {
	c := newChart(t)
	cs := cluster.Kube
	const ns = "resv-test"
	var cleanup []func()
	t.Cleanup(func() {
		for _, f := range cleanup {
			f()
		}
	})
	for _, obj := range c.render("chart-resv", "--set", "scheduler.workloadNamespace="+ns, "--show-only", "templates/rbac.yaml") {
		if !strings.HasSuffix(obj.GetName(), kube.ReservationServiceAccount) {
			continue // the scheduler's own
		}
		if err := c.create(&obj, ns, false); err != nil {
			t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetNamespace() == "" { // cluster-wide: the admission policy
			gvk := obj.GroupVersionKind()
			m, _ := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			name := obj.GetName()
			cleanup = append(cleanup, func() { _ = c.dyn.Resource(m.Resource).Delete(t.Context(), name, metav1.DeleteOptions{}) })
		}
	}
	cleanup = append(cleanup, func() { _ = cs.CoreV1().Namespaces().Delete(t.Context(), ns, metav1.DeleteOptions{}) })

	// Two reservation pods as the runtime makes them; nothing binds them
	// (the credentials, not the device, are under test).
	pod := func(name string) *corev1.Pod {
		p, err := cs.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kube.LabelReservation: "true"},
				Annotations: map[string]string{kube.AnnotationDevices: "0"}},
			Spec: corev1.PodSpec{SchedulerName: "nobody", ServiceAccountName: kube.ReservationServiceAccount,
				Containers: []corev1.Container{{Name: "reserve", Image: "runway"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mine, other := pod("gpu-n1-0"), pod("gpu-n1-1")
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), kube.ReservationServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{BoundObjectRef: &authenticationv1.BoundObjectReference{
			Kind: "Pod", APIVersion: "v1", Name: mine.Name, UID: mine.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc := rest.AnonymousClientConfig(cluster.Config)
	rc.BearerToken = tok.Status.Token
	as, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}

	// The policy takes effect once the apiserver has loaded it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := kube.ReportGPU(t.Context(), as, ns, other.Name, "GPU-0ther")
		if apierrors.IsForbidden(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a reservation pod's credentials on another reservation pod: %v, want Forbidden", err)
		}
		_, _ = cs.CoreV1().Pods(ns).Patch(t.Context(), other.Name, types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/metadata/annotations/runway.io~1gpu-uuid"}]`), metav1.PatchOptions{})
		time.Sleep(200 * time.Millisecond)
	}
	if err := kube.ReportGPU(t.Context(), as, ns, mine.Name, "GPU-1111"); err != nil {
		t.Fatalf("a reservation pod reporting its GPU on itself: %v", err)
	}
	if err := kube.ReportGPU(t.Context(), as, ns, mine.Name, "GPU-1111"); err != nil {
		t.Errorf("the same report again (its container restarted): %v", err)
	}
	if err := kube.ReportGPU(t.Context(), as, ns, mine.Name, "GPU-2222"); !apierrors.IsForbidden(err) {
		t.Errorf("a reservation pod changing the GPU it reported: %v, want Forbidden", err)
	}
	patch := func(name string, body map[string]any) error {
		b, _ := json.Marshal(body)
		_, err := as.CoreV1().Pods(ns).Patch(t.Context(), name, types.MergePatchType, b, metav1.PatchOptions{})
		return err
	}
	for what, body := range map[string]map[string]any{
		"its labels":         {"metadata": map[string]any{"labels": map[string]string{kube.LabelReservation: "false"}}},
		"its devices":        {"metadata": map[string]any{"annotations": map[string]string{kube.AnnotationDevices: "3"}}},
		"another annotation": {"metadata": map[string]any{"annotations": map[string]string{"x": "y"}}},
		"a finalizer":        {"metadata": map[string]any{"finalizers": []string{"example.com/hold"}}},
		"its image":          {"spec": map[string]any{"containers": []map[string]any{{"name": "reserve", "image": "evil"}}}},
	} {
		if err := patch(mine.Name, body); !apierrors.IsForbidden(err) {
			t.Errorf("a reservation pod changing %s: %v, want Forbidden", what, err)
		}
	}
	if _, err := as.CoreV1().Pods(ns).Get(t.Context(), other.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a reservation pod reading another pod: %v, want Forbidden", err)
	}
	if _, err := as.CoreV1().Pods(ns).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a reservation pod creating a pod: %v, want Forbidden", err)
	}
	if err := kube.ReportGPU(t.Context(), as, "default", mine.Name, "GPU-1111"); !apierrors.IsForbidden(err) {
		t.Errorf("a reservation pod patching in another namespace: %v, want Forbidden", err)
	}
	got, err := cs.CoreV1().Pods(ns).Get(t.Context(), mine.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[kube.AnnotationGPUUUID] != "GPU-1111" || got.Labels[kube.LabelReservation] != "true" || got.Annotations[kube.AnnotationDevices] != "0" {
		t.Errorf("the reservation pod after the attempts: labels %v annotations %v, want only its GPU written", got.Labels, got.Annotations)
	}
}
