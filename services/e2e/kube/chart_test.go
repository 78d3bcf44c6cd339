package kube_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// TestChartValidates sends every object the Helm chart renders (defaults,
// and the agent DaemonSet with the local runtime and in Kubernetes mode) to the API server as a
// server-side dry run: the server's own validation accepts the manifests.
func TestChartValidates(t *testing.T) {
	cs := kubeClient(t)
	helm, _ := filepath.Abs("../../../bin/helm")
	if _, err := os.Stat(helm); err != nil {
		t.Skipf("helm %s is missing (%v): run `make helm` to build it from its Go module", helm, err)
	}
	const ns = "chart-test"
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	for name, args := range map[string][]string{
		"defaults":                     nil,
		"local runtime with the agent": {"--set", "agent.enabled=true", "--set", "scheduler.runtime=local"},
		"the agent in Kubernetes mode": {"--set", "agent.enabled=true"},
		"plaintext":                    {"--set", "tls.enabled=false"},
		"mutual TLS and SSO":           {"--set", "tls.mutual=true", "--set", "identity.oidc.issuer=https://login.example.com", "--set", "identity.oidc.clientId=runway"},
		"the metrics service": {"--set", "metricsService.enabled=true", "--set", "metricsService.prometheusUrl=http://prometheus:9090",
			"--set", "metricsService.s3.endpoint=https://s3.example.com", "--set", "metricsService.s3.caSecret=s3-ca"},
	} {
		out, err := exec.Command(helm, append([]string{"template", "rw", "../../../deploy/runway", "--namespace", ns}, args...)...).Output()
		if err != nil {
			t.Fatalf("%s: helm template: %v", name, err)
		}
		kinds := map[string]int{}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
		for {
			var obj unstructured.Unstructured
			err := dec.Decode(&obj.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: decode: %v", name, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, gvk, err)
			}
			r := dyn.Resource(m.Resource)
			var ri dynamic.ResourceInterface = r
			if m.Scope.Name() == "namespace" {
				in := ns
				if obj.GetNamespace() != "" { // the workloads' namespace, which the chart expects to exist
					in = obj.GetNamespace()
					_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in}}, metav1.CreateOptions{})
					if err != nil && !apierrors.IsAlreadyExists(err) {
						t.Fatal(err)
					}
				}
				ri = r.Namespace(in)
			}
			if _, err := ri.Create(t.Context(), &obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("%s: %s %s rejected: %v", name, gvk.Kind, obj.GetName(), err)
			}
			kinds[gvk.Kind]++
		}
		// The five services and the gateway in front of them.
		want := map[string]int{"Deployment": 6, "Service": 6, "ServiceAccount": 2, "ClusterRole": 1, "ClusterRoleBinding": 1,
			"Role": 1, "RoleBinding": 1}
		if name == "local runtime with the agent" {
			want["DaemonSet"] = 1
		}
		if name == "the agent in Kubernetes mode" {
			want["DaemonSet"], want["ServiceAccount"], want["Role"], want["RoleBinding"] = 1, 3, 2, 2
			want["ValidatingAdmissionPolicy"], want["ValidatingAdmissionPolicyBinding"] = 1, 1
		}
		if name == "the metrics service" {
			want["Deployment"], want["Service"] = 7, 7
		}
		// TLS is on unless turned off: every service, the gateway and the
		// agents serve and call with it.
		if tlsArgs := strings.Count(string(out), "--tls-cert-file="); (tlsArgs == want["Deployment"]+want["DaemonSet"]) != (name != "plaintext") {
			t.Errorf("%s: %d services with --tls-cert-file", name, tlsArgs)
		}
		for k, n := range want {
			if kinds[k] != n {
				t.Errorf("%s: rendered %d %s, want %d (all: %v)", name, kinds[k], k, n, kinds)
			}
		}
	}
}
