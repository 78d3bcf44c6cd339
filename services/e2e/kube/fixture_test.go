package kube_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runwayhq/runway/cmd/runway/server"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/services/nodemanager/kube"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
	"github.com/runwayhq/runway/services/scheduler"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// env is one test's Runway (server.RunDev with the Kubernetes runtime and
// no node agents) on the shared apiserver, and clients of both.
type env struct {
	kube kubernetes.Interface
	ns   string      // Runway's namespace: its reservation pods
	rw   *sdk.Client // Runway, through the SDK
	addr string      // Runway's gRPC address

	// The tool proxy's address and the bootstrap administrator's token.
	proxy, token string
	// The project of each workload the test submitted: its pods are in
	// kube.ProjectNamespace(project).
	projectOf map[string]string
	projects  []string // the projects made, whose namespaces' pods go at cleanup
	tolerate  []string // the runtime's global tolerations (KubeConfig.Tolerations), set before start
	dir       string   // Runway's data directory (its etcd answers on dir/etcd/client.sock)
	// The scheduler's NodeLostGrace (0: the Kubernetes runtime's default)
	// and clock (nil: time.Now), set before start.
	lostGrace time.Duration
	clock     func() time.Time
}

// projectNamespace waits until Runway has made the project's namespace,
// labelled as the project's, and deletes its pods at cleanup.
func (e *env) projectNamespace(t *testing.T, project string) string {
	t.Helper()
	name := kube.ProjectNamespace(project)
	t.Cleanup(func() {
		zero := int64(0)
		_ = e.kube.CoreV1().Pods(name).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = e.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	eventually(t, "namespace "+name+" made by Runway", func() string {
		ns, err := e.kube.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if ns.Labels[kube.LabelProject] != project {
			return fmt.Sprintf("labels %v", ns.Labels)
		}
		return ""
	})
	return name
}

// newEnv makes the test's namespaces (prefix-pods, prefix-users) and
// deletes, at cleanup, every pod in them and every node named prefix-*.
// Runway starts with start, so that a test can put objects in place first.
func newEnv(t *testing.T, prefix string) *env {
	t.Helper()
	cs := kubeClient(t)
	e := &env{kube: cs, ns: prefix + "-pods", projectOf: map[string]string{}}
	for _, ns := range []string{e.ns, prefix + "-users"} {
		if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace %s: %v", ns, err)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		zero := int64(0)
		for _, ns := range []string{e.ns, prefix + "-users"} {
			_ = cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		}
		for _, p := range e.projects {
			_ = cs.CoreV1().Pods(kube.ProjectNamespace(p)).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		}
		nodes, _ := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		for _, n := range nodes.Items {
			if strings.HasPrefix(n.Name, prefix+"-") {
				_ = cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
			}
		}
	})
	return e
}

// start runs Runway until cleanup.
func (e *env) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	e.dir = t.TempDir()
	cfg := server.DevConfig{DataDir: e.dir, Listen: "127.0.0.1:0", Logger: quiet,
		EtcdOptions: []etcdtest.Option{etcdtest.WithTestSpeedups(), etcdtest.WithLogger(zap.NewNop())},
		Scheduler: scheduler.Config{Interval: 100 * time.Millisecond, Debounce: 10 * time.Millisecond,
			NodeLostGrace: e.lostGrace, Clock: e.clock},
		Kube: &server.KubeConfig{Kubeconfig: cluster.Kubeconfig, Namespace: e.ns, DeleteGrace: 30 * time.Second, LeaseTTL: 5 * time.Second,
			Tolerations: e.tolerate}}
	cfg.ProxyReady = func(addr string) { e.proxy = addr }
	go func() { done <- server.RunDev(ctx, cfg, func(addr, token string) { ready <- [2]string{addr, token} }) }()
	var at [2]string
	select {
	case at = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("RunDev: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("RunDev not ready after 30s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("RunDev: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("RunDev did not stop within 30s of its context's end")
		}
	})
	// The bootstrap administrator's token, as `runway dev` writes it.
	c, err := sdk.Dial(t.Context(), sdk.Config{Server: at[0], Token: at[1]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	e.rw, e.addr, e.token = c, at[0], at[1]
}

// node creates a node with gpus nvidia.com/gpu and GPU feature
// discovery's labels, which KWOK plays the kubelet of: it turns Ready and
// runs the pods bound to it.
func (e *env) node(t *testing.T, name string, gpus int64) {
	t.Helper()
	e.nodes(t, kwoktest.Node{Name: name, GPUs: gpus})
}

// nodes creates the nodes and waits until the managed ones are Ready.
func (e *env) nodes(t *testing.T, nodes ...kwoktest.Node) {
	t.Helper()
	if err := cluster.CreateNodes(t.Context(), nodes...); err != nil {
		t.Fatal(err)
	}
	var managed []string
	for _, n := range nodes {
		if !n.Unmanaged {
			managed = append(managed, n.Name)
		}
	}
	if err := cluster.WaitReady(t.Context(), managed...); err != nil {
		t.Fatal(err)
	}
}

// notReady has KWOK turn the node NotReady, as the node lifecycle
// controller does when its kubelet stops posting status.
func (e *env) notReady(t *testing.T, name string) {
	t.Helper()
	if err := cluster.NotReady(t.Context(), name); err != nil {
		t.Fatal(err)
	}
}

func (e *env) project(t *testing.T, id string, gpus int64) {
	t.Helper()
	deserved := gpus * 1000
	_, err := e.rw.CreateProject(t.Context(), id, &quotav1.Project{
		NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
			Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}})
	if err != nil {
		t.Fatalf("CreateProject(%s): %v", id, err)
	}
	e.projects = append(e.projects, id)
}

// training submits a training of pods pods with gpus GPUs each.
func (e *env) training(t *testing.T, project, id string, pods, gpus int32) {
	t.Helper()
	_, err := e.rw.SubmitWorkload(t.Context(), project, id, workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, Pods: pods,
			MilliCpu: 100, MemoryBytes: 100 << 20,
			Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: gpus}}})
	if err != nil {
		t.Fatalf("CreateWorkload(%s/%s): %v", project, id, err)
	}
	e.projectOf[id] = project
}

func (e *env) get(t *testing.T, project, id string) *workloadv1.Workload {
	t.Helper()
	w, err := e.rw.GetWorkload(t.Context(), project, id)
	if err != nil {
		t.Fatalf("GetWorkload(%s/%s): %v", project, id, err)
	}
	return w
}

// pods lists the workload's pods in the API server, in its project's
// namespace: live ones (not being deleted) and those being deleted.
func (e *env) pods(t *testing.T, workload string) (live, deleting []corev1.Pod) {
	t.Helper()
	project, ok := e.projectOf[workload]
	if !ok {
		t.Fatalf("workload %s was not submitted by the test", workload)
	}
	l, err := e.kube.CoreV1().Pods(kube.ProjectNamespace(project)).List(t.Context(), metav1.ListOptions{LabelSelector: kube.LabelWorkload + "=" + workload})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		} else {
			deleting = append(deleting, p)
		}
	}
	return live, deleting
}

// bound waits until the workload has exactly n live pods, each bound to a
// node (spec.nodeName and PodScheduled, set by the Binding subresource),
// and returns them.
func (e *env) bound(t *testing.T, workload string, n int) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	eventually(t, workload+"'s pods bound", func() string {
		live, _ := e.pods(t, workload)
		if len(live) != n {
			return fmt.Sprintf("%d live pods, want %d", len(live), n)
		}
		for _, p := range live {
			if p.Spec.NodeName == "" || !scheduled(p) {
				return fmt.Sprintf("pod %s not bound (nodeName %q)", p.Name, p.Spec.NodeName)
			}
		}
		out = live
		return ""
	})
	return out
}

// scheduled: bound by the Binding subresource (PodScheduled), or created
// bound by Runway (a pod of its own, with its node from the start).
func scheduled(p corev1.Pod) bool {
	if p.Labels[kube.LabelWorkload] != "" && p.Spec.NodeName != "" {
		return true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// eventually polls cond every 50 ms until it returns "" (met), failing
// with its last answer after 30 s.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// workloads lists the project's workloads.
func (e *env) workloads(t *testing.T, project string) []*workloadv1.Workload {
	t.Helper()
	var out []*workloadv1.Workload
	for w, err := range e.rw.Workloads(t.Context(), project, "") {
		if err != nil {
			t.Fatalf("list workloads of %s: %v", project, err)
		}
		out = append(out, w)
	}
	return out
}

// etcdClient is a client of Runway's etcd (its unix socket in the data
// directory), closed at cleanup.
func (e *env) etcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{"unix://" + filepath.Join(e.dir, "etcd", "client.sock")},
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = etcd.Close() })
	return etcd
}
