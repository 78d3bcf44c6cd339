package kube_test

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// TestChartMarkKeyOutOfAgentsReach: with the chart's RBAC (Kubernetes
// mode, the agent on), root on a node holding its agent's Kubernetes
// credentials cannot read the mark key's Secret, list Secrets, nor mint a
// token of the agents' account bound to another node's agent pod (which
// would get that node's key); the nodemanager's and the scheduler's
// accounts read the Secret, the reservation pods' do not.
func TestChartMarkKeyOutOfAgentsReach(t *testing.T) {
	c := newChart(t)
	cs := cluster.Kube
	const release, workloads = "mk-system", "mk-pods"
	for _, ns := range []string{release, workloads} {
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, ns := range []string{release, workloads} {
			_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		}
	})
	for _, obj := range c.render(release, "--set", "agent.enabled=true", "--set", "scheduler.workloadNamespace="+workloads) {
		switch obj.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		default:
			continue
		}
		if err := c.create(&obj, release, false); err != nil {
			t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
		if obj.GetNamespace() == "" && (obj.GetKind() == "ClusterRole" || obj.GetKind() == "ClusterRoleBinding") {
			gvk := obj.GroupVersionKind()
			m, _ := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			name := obj.GetName()
			t.Cleanup(func() { _ = c.dyn.Resource(m.Resource).Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
	}
	if _, err := cs.CoreV1().Secrets(workloads).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kube.MarkKeySecret},
		Data: map[string][]byte{"key": make([]byte, 32)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two agent pods of the DaemonSet, on node-a and node-b.
	var onB *corev1.Pod
	for _, node := range []string{"node-a", "node-b"} {
		p, err := cs.CoreV1().Pods(release).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-" + node},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "rw-runway-agent", Containers: []corev1.Container{{Name: "agent", Image: "runway"}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		onB = p
	}
	as := func(account string) kubernetes.Interface {
		rc := rest.CopyConfig(cluster.Config)
		rc.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + release + ":" + account}
		if account == "runway-gpu-reservation" {
			rc.Impersonate.UserName = "system:serviceaccount:" + workloads + ":" + account
		}
		k, err := kubernetes.NewForConfig(rc)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for account, reads := range map[string]bool{"rw-runway-agent": false, "rw-runway-nodemanager": true, "rw-runway": true,
		"runway-gpu-reservation": false} {
		_, err := as(account).CoreV1().Secrets(workloads).Get(t.Context(), kube.MarkKeySecret, metav1.GetOptions{})
		if reads && err != nil || !reads && !apierrors.IsForbidden(err) {
			t.Errorf("%s reading the mark key's Secret: %v, want read %v (else Forbidden)", account, err, reads)
		}
		if _, err := as(account).CoreV1().Secrets(workloads).List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s listing the Secrets of the workloads' namespace: %v, want Forbidden", account, err)
		}
	}
	agent := as("rw-runway-agent")
	_, err := agent.CoreV1().ServiceAccounts(release).CreateToken(t.Context(), "rw-runway-agent", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{kube.DefaultNodeKeyAudience},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: onB.Name, UID: onB.UID}}},
		metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node-a's agent minting a token bound to node-b's agent pod: %v, want Forbidden", err)
	}
	if _, err := agent.CoreV1().Pods(release).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "agent-x"},
		Spec: corev1.PodSpec{NodeName: "node-b", ServiceAccountName: "rw-runway-agent", Containers: []corev1.Container{{Name: "a", Image: "x"}}}},
		metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node-a's agent creating a pod of its account on node-b: %v, want Forbidden", err)
	}
}
