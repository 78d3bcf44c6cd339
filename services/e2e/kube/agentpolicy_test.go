package kube_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// TestAgentPodPolicy: the chart's admission policy holds a Kubernetes-mode
// agent's token (a ServiceAccount token issued on node-a, impersonated
// here) to what RBAC cannot: the annotations it writes, on pods of its
// own node only; the same patches by another user pass.
func TestAgentPodPolicy(t *testing.T) {
	cs := kubeClient(t)
	helm, _ := filepath.Abs("../../../bin/helm")
	if _, err := os.Stat(helm); err != nil {
		t.Skipf("helm %s is missing (%v): run `make helm` to build it from its Go module", helm, err)
	}
	const release, workloads = "vap-system", "vap-pods"
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloads}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = cs.CoreV1().Pods(workloads).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), workloads, metav1.DeleteOptions{})
	})
	out, err := exec.Command(helm, "template", "rw", "../../../deploy/runway", "--namespace", release,
		"--set", "agent.enabled=true", "--set", "scheduler.workloadNamespace="+workloads).Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's policy and its binding, and its RBAC (the apiserver
	// authorizes with RBAC: the policy narrows what RBAC grants).
	resources := map[string]schema.GroupVersionResource{
		"ValidatingAdmissionPolicy":        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		"ValidatingAdmissionPolicyBinding": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
		"ClusterRole":                      {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		"ClusterRoleBinding":               {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for made := 0; ; {
		var obj unstructured.Unstructured
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			if made != len(resources) {
				t.Fatalf("the chart renders %d of the agent's admission policy, its binding, ClusterRole and ClusterRoleBinding, want all %d", made, len(resources))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		res, ok := resources[obj.GetKind()]
		if !ok || obj.GetName() != "rw-runway-agent" { // not the reservation pods' or the scheduler's
			continue
		}
		r := dyn.Resource(res)
		if _, err := r.Create(t.Context(), &obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", obj.GetKind(), err)
		}
		name := obj.GetName()
		t.Cleanup(func() { _ = r.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		made++
	}

	pod := func(name, node string) {
		t.Helper()
		_, err := cs.CoreV1().Pods(workloads).Create(t.Context(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kube.LabelWorkload: "w"},
				Annotations: map[string]string{kube.AnnotationBinding: "bindings/" + node + "/p.w.0"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	pod("on-a", "node-a")
	pod("on-b", "node-b")
	ac := rest.CopyConfig(cluster.Config)
	ac.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + release + ":rw-runway-agent",
		Extra: map[string][]string{"authentication.kubernetes.io/node-name": {"node-a"}}}
	agentClient, err := kubernetes.NewForConfig(ac)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(c kubernetes.Interface, name, body string) error {
		_, err := c.CoreV1().Pods(workloads).Patch(t.Context(), name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	ended := `{"metadata":{"annotations":{"` + kube.AnnotationEndedByAgent + `":"Out of GPU memory"}}}`
	// The policy takes effect a moment after it is made.
	eventually(t, "the agent's patch of another node's pod refused", func() string {
		if err := patch(agentClient, "on-b", ended); err == nil {
			return "allowed"
		}
		return ""
	})
	for _, tc := range []struct {
		name, pod, body string
		allowed         bool
	}{
		{"its own node's pod, why it ended it", "on-a", ended, true},
		{"its own node's pod, the idle time", "on-a", `{"metadata":{"annotations":{"` + kube.AnnotationGPUIdleSeconds + `":"30"}}}`, true},
		{"its own node's pod, the findings' signature", "on-a", `{"metadata":{"annotations":{"` + kube.AnnotationAgentReportMAC + `":"1.x"}}}`, true},
		{"its own node's pod, clearing why it ended", "on-a", `{"metadata":{"annotations":{"` + kube.AnnotationEndedByAgent + `":null}}}`, true},
		{"another node's pod", "on-b", ended, false},
		{"the binding annotation", "on-a", `{"metadata":{"annotations":{"` + kube.AnnotationBinding + `":"bindings/x/p.v.0"}}}`, false},
		{"a label", "on-a", `{"metadata":{"labels":{"` + kube.LabelWorkload + `":"v"}}}`, false},
		{"the image", "on-a", `{"spec":{"containers":[{"name":"main","image":"evil"}]}}`, false},
	} {
		err := patch(agentClient, tc.pod, tc.body)
		if (err == nil) != tc.allowed {
			t.Errorf("%s: patch error %v, want allowed %v", tc.name, err, tc.allowed)
		}
	}
	if err := patch(cs, "on-b", ended); err != nil {
		t.Errorf("another user's patch refused: %v", err)
	}
	p, err := cs.CoreV1().Pods(workloads).Get(t.Context(), "on-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(p.Annotations[kube.AnnotationBinding], " ", p.Spec.Containers[0].Image); got != "bindings/node-a/p.w.0 busybox" {
		t.Errorf("on-a's binding and image: %s", got)
	}
}
