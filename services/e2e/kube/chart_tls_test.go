package kube_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartOperationsPortTLS: with TLS on (the default), every container
// that serves an operations port (--metrics-listen) serves its API with
// TLS, which the operations port then serves too (runway serve, gateway:
// --metrics-tls-* default to the API's files), with the client CA under
// tls.mutual; the scrape annotations say https, and the ServiceMonitor
// scrapes with the CA (and, mutual, the certificate). Plaintext says none.
func TestChartOperationsPortTLS(t *testing.T) {
	c := newChart(t)
	for name, tc := range map[string]struct {
		args          []string
		tls, mutual   bool
		monitorScheme string
	}{
		"defaults":   {args: []string{"--set", "metrics.serviceMonitor.enabled=true"}, tls: true, monitorScheme: "https"},
		"mutual TLS": {args: []string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "tls.mutual=true"}, tls: true, mutual: true, monitorScheme: "https"},
		"plaintext":  {args: []string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "tls.enabled=false"}},
	} {
		ops, monitors := 0, 0
		for _, obj := range c.render("chart-tls", tc.args...) {
			switch obj.GetKind() {
			case "Deployment":
				scheme, _, _ := unstructured.NestedString(obj.Object, "spec", "template", "metadata", "annotations", "prometheus.io/scheme")
				containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
				for _, ct := range containers {
					args, _, _ := unstructured.NestedStringSlice(ct.(map[string]any), "args")
					if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--metrics-listen=") }) {
						continue
					}
					ops++
					has := func(flag string) bool {
						return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, flag+"=") })
					}
					if has("--tls-cert-file") != tc.tls || has("--tls-client-ca-file") != tc.mutual {
						t.Errorf("%s: %s serves --metrics-listen with args %v", name, obj.GetName(), args)
					}
					if (scheme == "https") != tc.tls {
						t.Errorf("%s: %s scrape scheme %q", name, obj.GetName(), scheme)
					}
				}
			case "ServiceMonitor":
				monitors++
				eps, _, _ := unstructured.NestedSlice(obj.Object, "spec", "endpoints")
				for _, ep := range eps {
					ep := ep.(map[string]any)
					scheme, _, _ := unstructured.NestedString(ep, "scheme")
					ca, _, _ := unstructured.NestedString(ep, "tlsConfig", "ca", "secret", "key")
					cert, _, _ := unstructured.NestedString(ep, "tlsConfig", "cert", "secret", "key")
					if scheme != tc.monitorScheme || (ca == "ca.crt") != tc.tls || (cert == "tls.crt") != tc.mutual {
						t.Errorf("%s: ServiceMonitor endpoint %v", name, ep)
					}
				}
			}
		}
		if ops != 6 || monitors != 1 {
			t.Errorf("%s: %d containers with an operations port, %d ServiceMonitors; want 6 and 1", name, ops, monitors)
		}
	}
}
