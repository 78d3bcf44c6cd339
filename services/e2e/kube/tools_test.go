package kube_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// listenAt serves h on addr, an address of the Service's cluster range
// that the test puts on the loopback interface (as kube-proxy would route
// it to the pod), until cleanup.
func listenAt(t *testing.T, addr string, h http.Handler) {
	t.Helper()
	host, _, _ := net.SplitHostPort(addr)
	if out, err := exec.Command("ip", "addr", "add", host+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr add %s/32 dev lo: %v %s", host, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", host+"/32", "dev", "lo").Run() })
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// A workspace with a tool on the Kubernetes runtime: the runtime writes a
// ClusterIP Service in the project's namespace for it (its tool's port, its
// pods' labels as the selector, owned by its pod, nothing published beyond
// the cluster), its run report carries the Service's address, and the tool
// proxy forwards its owner's requests there (a test server standing in for
// the pod behind the Service), without the caller's credential, and
// refuses a caller without one.
func TestToolService(t *testing.T) {
	e := newEnv(t, "tl")
	e.node(t, "tl-node-1", 1)
	e.start(t)
	e.project(t, "team-a", 1)
	ns := e.projectNamespace(t, "team-a")
	t.Cleanup(func() {
		_ = e.kube.CoreV1().Services(ns).Delete(t.Context(), kube.ToolsServiceName("ws"), metav1.DeleteOptions{})
	})
	if _, err := e.rw.SubmitWorkload(t.Context(), "team-a", "ws", workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE,
		&workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, MilliCpu: 100, MemoryBytes: 100 << 20,
			Tools: []*workloadv1.Tool{{Name: "web", Type: workloadv1.ToolType_TOOL_TYPE_CUSTOM, Port: 8080}}}); err != nil {
		t.Fatal(err)
	}
	e.projectOf["ws"] = "team-a"
	pod := e.bound(t, "ws", 1)[0]
	e.podRunning(t, "team-a", "ws")
	if got := pod.Spec.Containers[0].Ports; len(got) != 1 || got[0].ContainerPort != 8080 || got[0].Name != "web" {
		t.Errorf("the pod's container ports are %v, want web 8080", got)
	}

	svc, err := e.kube.CoreV1().Services(ns).Get(t.Context(), kube.ToolsServiceName("ws"), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the workload's Service: %v", err)
	}
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 8080 ||
		svc.Spec.Ports[0].TargetPort.IntVal != 8080 || svc.Spec.Ports[0].NodePort != 0 || len(svc.Spec.ExternalIPs) != 0 {
		t.Errorf("the Service's spec is %+v, want a ClusterIP with port 8080 only", svc.Spec)
	}
	if s := svc.Spec.Selector; len(s) != 2 || s[kube.LabelProject] != "team-a" || s[kube.LabelWorkload] != "ws" {
		t.Errorf("the Service selects %v, want the workload's pods", s)
	}
	if !slices.ContainsFunc(svc.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == pod.UID && o.Kind == "Pod" }) {
		t.Errorf("the Service's owners are %v, want the pod %s", svc.OwnerReferences, pod.Name)
	}
	want := net.JoinHostPort(svc.Spec.ClusterIP, "8080")
	eventually(t, "the run report's tool address", func() string {
		ps := e.get(t, "team-a", "ws").GetStatus().GetPods()
		if len(ps) != 1 || len(ps[0].GetPorts()) != 1 || ps[0].GetPorts()[0].GetAddress() != want {
			return fmt.Sprintf("pods %v, want port 8080 at %s", ps, want)
		}
		return ""
	})

	seen := make(chan http.Header, 4)
	listenAt(t, want, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header
		fmt.Fprintf(w, "pod says %s", r.URL.Path)
	}))
	url := "http://" + e.proxy + "/proxy/projects/team-a/workloads/ws/web/hello"
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "pod says /hello" {
		t.Fatalf("through the proxy: %d %q, want the pod's answer", resp.StatusCode, body)
	}
	if h := <-seen; h.Get("Authorization") != "" {
		b, _ := json.Marshal(h)
		t.Errorf("the pod got the caller's Authorization header: %s", b)
	}
	resp, err = http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("without credentials: %d, want 401 with a Bearer challenge", resp.StatusCode)
	}
}
