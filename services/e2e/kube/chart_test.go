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

// chart renders the Helm chart (helm template, release rw in ns) and
// sends its objects to the shared apiserver.
type chart struct {
	t      *testing.T
	helm   string
	dyn    *dynamic.DynamicClient
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newChart(t *testing.T) *chart {
	t.Helper()
	cs := kubeClient(t)
	helm, _ := filepath.Abs("../../../bin/helm")
	if _, err := os.Stat(helm); err != nil {
		t.Skipf("helm %s is missing (%v): run `make helm` to build it from its Go module", helm, err)
	}
	dyn, err := dynamic.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &chart{t: t, helm: helm, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))}
}

// render is what the chart renders with args, in namespace ns.
func (c *chart) render(ns string, args ...string) []unstructured.Unstructured {
	c.t.Helper()
	out, err := exec.Command(c.helm, append([]string{"template", "rw", "../../../deploy/runway", "--namespace", ns}, args...)...).Output()
	if err != nil {
		c.t.Fatalf("helm template %v: %v", args, err)
	}
	var objs []unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var obj unstructured.Unstructured
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			c.t.Fatalf("helm template %v: decode: %v", args, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// create sends obj to the apiserver (in ns unless it names its own
// namespace, which is created when missing), as a dry run when asked.
func (c *chart) create(obj *unstructured.Unstructured, ns string, dryRun bool) error {
	c.t.Helper()
	gvk := obj.GroupVersionKind()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		c.t.Fatalf("%s: %v", gvk, err)
	}
	r := c.dyn.Resource(m.Resource)
	var ri dynamic.ResourceInterface = r
	if m.Scope.Name() == "namespace" {
		in := ns
		if obj.GetNamespace() != "" { // the workloads' namespace, which the chart expects to exist
			in = obj.GetNamespace()
			_, err := cluster.Kube.CoreV1().Namespaces().Create(c.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				c.t.Fatal(err)
			}
		}
		ri = r.Namespace(in)
	}
	var opts metav1.CreateOptions
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Create(c.t.Context(), obj, opts)
	return err
}

// TestChartValidates sends every object the Helm chart renders (defaults,
// and the agent DaemonSet with the local runtime and in Kubernetes mode) to
// the API server as a
// server-side dry run: the server's own validation accepts the manifests.
func TestChartValidates(t *testing.T) {
	c := newChart(t)
	const ns = "chart-test"
	if _, err := cluster.Kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"defaults":                     nil,
		"local runtime with the agent": {"--set", "agent.enabled=true", "--set", "scheduler.runtime=local"},
		"the agent in Kubernetes mode": {"--set", "agent.enabled=true"},
		"plaintext":                    {"--set", "tls.enabled=false"},
		"mutual TLS and SSO":           {"--set", "tls.mutual=true", "--set", "identity.oidc.issuer=https://login.example.com", "--set", "identity.oidc.clientId=runway"},
		"the metrics service": {"--set", "metricsService.enabled=true", "--set", "metricsService.prometheusUrl=http://prometheus:9090",
			"--set", "metricsService.s3.endpoint=https://s3.example.com", "--set", "metricsService.s3.caSecret=s3-ca"},
		"the admission webhook": {"--set", "scheduler.admissionWebhook.enabled=true", "--set", "scheduler.admissionWebhook.caBundle=Y2VydA=="},
	} {
		kinds := map[string]int{}
		tlsArgs := 0
		for _, obj := range c.render(ns, args...) {
			if err := c.create(&obj, ns, true); err != nil {
				t.Errorf("%s: %s %s rejected: %v", name, obj.GetKind(), obj.GetName(), err)
			}
			kinds[obj.GetKind()]++
			b, _ := obj.MarshalJSON()
			tlsArgs += strings.Count(string(b), "--tls-cert-file=")
		}
		// The five services and the gateway in front of them; the
		// scheduler's and the reservation pods' accounts, the reservation
		// pods' admission policy and the mark key's Role.
		want := map[string]int{"Deployment": 6, "Service": 6, "ServiceAccount": 2, "ClusterRole": 1, "ClusterRoleBinding": 1,
			"Role": 2, "RoleBinding": 2, "ValidatingAdmissionPolicy": 1, "ValidatingAdmissionPolicyBinding": 1}
		if name == "local runtime with the agent" {
			// The agent's account and the nodemanager's, which reviews the
			// agents' tokens to give each its Runway token.
			want["DaemonSet"], want["ServiceAccount"], want["ClusterRole"], want["ClusterRoleBinding"] = 1, 4, 2, 2
			want["Role"], want["RoleBinding"] = 3, 3
		}
		if name == "the agent in Kubernetes mode" {
			// The agent's account and the nodemanager's (agents' tokens reviewed, their pods read).
			want["DaemonSet"], want["ServiceAccount"], want["ClusterRole"], want["ClusterRoleBinding"] = 1, 4, 3, 3
			want["Role"], want["RoleBinding"] = 3, 3
			want["ValidatingAdmissionPolicy"], want["ValidatingAdmissionPolicyBinding"] = 2, 2
		}
		if name == "the metrics service" {
			want["Deployment"], want["Service"] = 7, 7
		}
		if name == "the admission webhook" {
			want["MutatingWebhookConfiguration"] = 1
		}
		// TLS is on unless turned off: every service, the gateway and the
		// agents serve and call with it.
		if (tlsArgs == want["Deployment"]+want["DaemonSet"]) != (name != "plaintext") {
			t.Errorf("%s: %d services with --tls-cert-file", name, tlsArgs)
		}
		for k, n := range want {
			if kinds[k] != n {
				t.Errorf("%s: rendered %d %s, want %d (all: %v)", name, kinds[k], k, n, kinds)
			}
		}
	}
}
