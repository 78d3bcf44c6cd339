package kube_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// fractionPod is a user's pod asking Runway for half a GPU; with envFrom it
// reads its GPU from the ConfigMap Runway writes at binding.
func fractionPod(name string, envFrom bool) *corev1.Pod {
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	c := corev1.Container{Name: "main", Image: "pytorch", Resources: corev1.ResourceRequirements{Requests: cpu}}
	if envFrom {
		c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: kube.UserGPUConfigMap(name)}}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{kube.AnnotationGPUFraction: "0.5"}},
		Spec:       corev1.PodSpec{SchedulerName: kube.SchedulerName, Containers: []corev1.Container{c}},
	}
}

// TestUserPodFraction: a user's own pod asking for 0.5 GPU gets a
// reservation pod, and the ConfigMap it reads its environment from holds
// the UUID that reservation reports (and RUNWAY_*), owned by the pod; a
// whole-GPU pod never gets that GPU, even while the user's pod, evicted,
// is in its grace period. A fraction's pod that does not read the
// ConfigMap is not bound, and an event on it says why.
func TestUserPodFraction(t *testing.T) {
	e := newEnv(t, "ufrac")
	plugin, err := cluster.StartDevicePlugin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	e.node(t, "ufrac-node-1", 2)
	e.start(t)
	e.project(t, "team-uf", 2)
	ns := e.projectNamespace(t, "team-uf")

	nb, err := e.kube.CoreV1().Pods(ns).Create(t.Context(), fractionPod("nb", true), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Pods(ns).Create(t.Context(), fractionPod("blind", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var uuid string
	eventually(t, "the user's fraction pod bound, its GPU in its ConfigMap", func() string {
		p, err := e.kube.CoreV1().Pods(ns).Get(t.Context(), "nb", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if p.Spec.NodeName != "ufrac-node-1" {
			return fmt.Sprintf("nodeName %q", p.Spec.NodeName)
		}
		res := e.reservations(t)
		if len(res) != 1 || res[0].Annotations[kube.AnnotationGPUUUID] == "" {
			return fmt.Sprintf("reservation pods %v", res)
		}
		uuid = res[0].Annotations[kube.AnnotationGPUUUID]
		return ""
	})
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), kube.UserGPUConfigMap("nb"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the bound fraction pod's ConfigMap: %v", err)
	}
	for k, want := range map[string]string{"NVIDIA_VISIBLE_DEVICES": uuid, local.EnvVisibleDevices: uuid,
		local.EnvFractionMilli: "500", local.EnvProject: "team-uf"} {
		if cm.Data[k] != want {
			t.Errorf("ConfigMap %s: %s=%q, want %q (all: %v)", cm.Name, k, cm.Data[k], want, cm.Data)
		}
	}
	if o := cm.OwnerReferences; len(o) != 1 || o[0].Kind != "Pod" || o[0].UID != nb.UID {
		t.Errorf("ConfigMap %s owned by %v, want the pod %s", cm.Name, o, nb.UID)
	}

	// A whole GPU goes to another pod: the kubelet never gives that one.
	e.wholeGPUElsewhere(t, "team-uf", "w1", uuid)

	// The pod without the reference: refused, said so, never bound.
	eventually(t, "an event on the refused pod", func() string {
		evs, err := e.kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "blind").String()})
		if err != nil {
			return err.Error()
		}
		for _, ev := range evs.Items {
			if ev.Reason == kube.EventReasonNoGPUConfigMap && ev.Type == corev1.EventTypeWarning {
				return ""
			}
		}
		return fmt.Sprintf("events %v", evs.Items)
	})
	time.Sleep(500 * time.Millisecond)
	if p, err := e.kube.CoreV1().Pods(ns).Get(t.Context(), "blind", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Errorf("the fraction pod without its ConfigMap: %v on %q, want it left unbound", err, p.Spec.NodeName)
	}
	if _, err := e.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), kube.UserGPUConfigMap("blind"), metav1.GetOptions{}); err == nil {
		t.Errorf("a ConfigMap written for the refused pod")
	}
	if ws := e.workloads(t, "team-uf"); len(ws) != 2 {
		t.Errorf("team-uf's workloads: %d, want nb's and w1 (none for the refused pod)", len(ws))
	}

	// Evicted (its workload deleted), the user's pod keeps its GPU through
	// its grace period: the reservation stays and no whole-GPU pod is put
	// on that GPU until the pod is gone.
	e.holdPod(t, *nb)
	for _, w := range e.workloads(t, "team-uf") {
		if id := path.Base(w.GetName()); id != "w1" {
			if err := e.rw.DeleteWorkload(t.Context(), "team-uf", id); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, "the user's pod terminating", func() string {
		if p, err := e.kube.CoreV1().Pods(ns).Get(t.Context(), "nb", metav1.GetOptions{}); err != nil || p.DeletionTimestamp == nil {
			return fmt.Sprintf("%v", err)
		}
		return ""
	})
	e.training(t, "team-uf", "w2", 1, 1)
	time.Sleep(time.Second)
	if res := e.reservations(t); len(res) != 1 || res[0].DeletionTimestamp != nil {
		t.Fatalf("the reservation went while the evicted user's pod still uses its GPU: %v", res)
	}
	if live, _ := e.pods(t, "w2"); len(live) != 0 {
		t.Fatalf("w2's pod %s created while the evicted user's pod still uses the GPU", live[0].Name)
	}
	e.releasePod(t, *nb)
	e.bound(t, "w2", 1)
	if res := e.reservations(t); len(res) != 0 {
		t.Errorf("reservation pods after the user's pod went: %v", res)
	}
	if r := plugin.Refused(); len(r) != 0 {
		t.Errorf("the kubelet would have refused %v", r)
	}
}

// TestAdmissionWebhookAddsGPUConfigMap: with kube.ServeAdmission (what
// `runway serve scheduler --kube-webhook-listen` runs) as a mutating
// webhook of the real apiserver, a user's fraction
// pod whose name is generated (as a Job's or a Deployment's are) gets the
// envFrom reference and a ConfigMap name of the webhook's choosing, is
// bound, and reads the reservation's UUID from that ConfigMap.
func TestAdmissionWebhookAddsGPUConfigMap(t *testing.T) {
	e := newEnv(t, "uhook")
	if _, err := cluster.StartDevicePlugin(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.node(t, "uhook-node-1", 1)
	e.start(t)
	e.project(t, "team-uh", 1)
	ns := e.projectNamespace(t, "team-uh")

	certs := tlstest.New(t)
	tlsCfg, err := grpcserver.LoadTLS(certs.Cert, certs.Key, "")
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- kube.ServeAdmission(ctx, l, tlsCfg, quiet) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("ServeAdmission: %v", err)
		}
	})
	ca, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + l.Addr().String() + "/mutate-pods"
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	hooks := e.kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := hooks.Create(t.Context(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "uhook-runway-gpu"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "gpu-configmap.runway.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			SideEffects:       &none, FailurePolicy: &fail, AdmissionReviewVersions: []string{"v1"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hooks.Delete(context.Background(), "uhook-runway-gpu", metav1.DeleteOptions{}) })

	job := fractionPod("", false)
	job.GenerateName = "train-"
	// The apiserver loads the webhook shortly after it is created.
	eventually(t, "the webhook called", func() string {
		p, err := e.kube.CoreV1().Pods(ns).Create(t.Context(), job, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err.Error()
		}
		if len(p.Spec.Containers[0].EnvFrom) == 0 {
			return "not mutated yet"
		}
		return ""
	})
	created, err := e.kube.CoreV1().Pods(ns).Create(t.Context(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cmName := created.Annotations[kube.AnnotationGPUConfigMap]
	if ef := created.Spec.Containers[0].EnvFrom; cmName == "" || len(ef) != 1 || ef[0].ConfigMapRef == nil || ef[0].ConfigMapRef.Name != cmName {
		t.Fatalf("the generated pod %s: annotation %q, envFrom %v; want both naming one ConfigMap", created.Name, cmName, ef)
	}
	eventually(t, "the generated fraction pod bound, its GPU in its ConfigMap", func() string {
		p, err := e.kube.CoreV1().Pods(ns).Get(t.Context(), created.Name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if p.Spec.NodeName != "uhook-node-1" {
			return fmt.Sprintf("nodeName %q", p.Spec.NodeName)
		}
		res := e.reservations(t)
		if len(res) != 1 || res[0].Annotations[kube.AnnotationGPUUUID] == "" {
			return fmt.Sprintf("reservation pods %v", res)
		}
		cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), cmName, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if got, want := cm.Data["NVIDIA_VISIBLE_DEVICES"], res[0].Annotations[kube.AnnotationGPUUUID]; got != want {
			t.Fatalf("ConfigMap %s: NVIDIA_VISIBLE_DEVICES=%q, want the reservation's %q", cmName, got, want)
		}
		return ""
	})
}

// TestUserPodConfigMapNotTakenOver: a user's fraction pod that names a
// ConfigMap Runway did not write for it (an administrator's, or
// kube-root-ca.crt) is not bound, and that ConfigMap is left as it was: the
// pod's annotations are its user's, not a lever on Runway's RBAC.
func TestUserPodConfigMapNotTakenOver(t *testing.T) {
	e := newEnv(t, "ucm")
	if _, err := cluster.StartDevicePlugin(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.node(t, "ucm-node-1", 1)
	e.start(t)
	e.project(t, "team-ucm", 1)
	ns := e.projectNamespace(t, "team-ucm")
	admins := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "team-settings", Namespace: ns}, Data: map[string]string{"keep": "me"}}
	if _, err := e.kube.CoreV1().ConfigMaps(ns).Create(t.Context(), admins, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := fractionPod("squat", false)
	p.Annotations[kube.AnnotationGPUConfigMap] = "team-settings"
	p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "team-settings"}}}}
	if _, err := e.kube.CoreV1().Pods(ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The runtime got as far as the GPU: the reservation reports its UUID,
	// which is what the ConfigMap would hold.
	eventually(t, "the pod's reservation with its GPU", func() string {
		if res := e.reservations(t); len(res) != 1 || res[0].Annotations[kube.AnnotationGPUUUID] == "" {
			return fmt.Sprintf("reservation pods %v", res)
		}
		return ""
	})
	time.Sleep(time.Second)
	cm, err := e.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), "team-settings", metav1.GetOptions{})
	if err != nil || len(cm.Data) != 1 || cm.Data["keep"] != "me" || len(cm.OwnerReferences) != 0 {
		t.Errorf("the administrator's ConfigMap after the pod named it: %v %v (owners %v), want it untouched", cm.Data, err, cm.OwnerReferences)
	}
	if got, err := e.kube.CoreV1().Pods(ns).Get(t.Context(), "squat", metav1.GetOptions{}); err != nil || got.Spec.NodeName != "" {
		t.Errorf("the pod naming another's ConfigMap: %v on %q, want it left unbound", err, got.Spec.NodeName)
	}
}
