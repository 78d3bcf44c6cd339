package kwoktest

import (
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runwayhq/runway/services/nodemanager/kube"
)

//go:embed stages/*.yaml
var stages embed.FS

// Annotation and label KWOK reads on a Node.
const (
	// AnnotationManaged marks the nodes KWOK plays the kubelet of.
	AnnotationManaged = "kwok.x-k8s.io/node"
	// LabelNotReady=true turns a managed node NotReady (stage node-not-ready).
	LabelNotReady = "node-not-ready.stage.kwok.x-k8s.io"
)

// Bin is the test binary name (kube-apiserver, kwok): $RUNWAY_KUBE_APISERVER
// or $RUNWAY_KWOK when set, else bin/name at the repository root (the
// first directory up from here with a go.work). The error says how to build
// it.
func Bin(name string) (string, error) {
	env := map[string]string{"kube-apiserver": "RUNWAY_KUBE_APISERVER", "kwok": "RUNWAY_KWOK"}[name]
	if p := os.Getenv(env); env != "" && p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			break
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.work above the working directory: cannot find bin/%s", name)
		}
		dir = up
	}
	p := filepath.Join(dir, "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is missing (%v): run `make %s` to build it from its pinned Go module", p, err, name)
	}
	return p, nil
}

// Cluster is a real kube-apiserver (on its own embedded etcd) and KWOK
// playing the kubelet of the nodes annotated AnnotationManaged: they turn
// Ready, pods bound to them go Running, deleted pods without finalizers go
// 200 ms after their deletion, and LabelNotReady turns them NotReady.
type Cluster struct {
	Config     *rest.Config
	Kubeconfig string // a kubeconfig file for Config
	Kube       kubernetes.Interface
	stops      []func()
}

// Start starts the cluster with its files in dir (which the caller
// removes). bin/kube-apiserver and bin/kwok must exist (Bin).
func Start(dir string) (*Cluster, error) {
	apiserver, err := Bin("kube-apiserver")
	if err != nil {
		return nil, err
	}
	kwok, err := Bin("kwok")
	if err != nil {
		return nil, err
	}
	stop, cfg, err := StartAPIServer(apiserver, dir)
	if err != nil {
		return nil, fmt.Errorf("start kube-apiserver: %w", err)
	}
	c := &Cluster{Config: cfg, Kubeconfig: filepath.Join(dir, "kubeconfig"), stops: []func(){stop}}
	if c.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		c.Stop()
		return nil, err
	}
	if err := WriteKubeconfig(c.Kubeconfig, cfg); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.startKWOK(kwok, dir); err != nil {
		c.Stop()
		return nil, fmt.Errorf("start kwok: %w", err)
	}
	return c, nil
}

// startKWOK runs kwok with the embedded stages on the managed nodes.
func (c *Cluster) startKWOK(bin, dir string) error {
	args := []string{"--kubeconfig", c.Kubeconfig, "--server-address", "127.0.0.1:0",
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + AnnotationManaged + "=fake"}
	files, _ := stages.ReadDir("stages")
	for _, f := range files {
		b, _ := stages.ReadFile("stages/" + f.Name())
		p := filepath.Join(dir, "stage-"+f.Name())
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
		args = append(args, "-c", p)
	}
	log, err := os.Create(filepath.Join(dir, "kwok.log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	c.stops = append(c.stops, func() {
		terminate(cmd.Process, exited, 10*time.Second)
		_ = log.Close()
	})
	// KWOK is up once it makes a probe node Ready.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	probe := Node{Name: "kwoktest-probe"}
	if err := c.CreateNodes(ctx, probe); err != nil {
		return err
	}
	defer func() { _ = c.Kube.CoreV1().Nodes().Delete(context.Background(), probe.Name, metav1.DeleteOptions{}) }()
	done := make(chan error, 1)
	go func() { done <- c.WaitReady(ctx, probe.Name) }()
	select {
	case err := <-done:
		return err
	case <-exited:
		b, _ := os.ReadFile(log.Name())
		return fmt.Errorf("kwok exited:\n%s", tail(b, 4000))
	}
}

// Stop ends KWOK, the apiserver and its etcd.
func (c *Cluster) Stop() {
	for i := len(c.stops) - 1; i >= 0; i-- {
		c.stops[i]()
	}
	c.stops = nil
}

// Node is a fake GPU node.
type Node struct {
	Name   string
	GPUs   int64 // nvidia.com/gpu capacity and allocatable
	Labels map[string]string
	Taints []corev1.Taint
	// Unmanaged nodes are left alone by KWOK: CreateNodes makes them Ready,
	// and the pods bound to them stay Pending (no kubelet runs them).
	Unmanaged bool
}

// GPUNodes is n managed nodes prefix-0 … prefix-(n-1) of gpus GPUs each.
func GPUNodes(prefix string, n int, gpus int64) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{Name: fmt.Sprintf("%s-%d", prefix, i), GPUs: gpus}
	}
	return out
}

// Product and memory (MiB) of the nodes' GPUs, in GPU feature discovery's
// labels.
const (
	GPUProduct   = "NVIDIA-H100-80GB-HBM3"
	GPUMemoryMiB = 81559
)

// CreateNodes creates the nodes with their capacity (16 CPUs, 64 GiB, 110
// pods, GPUs) and GPU feature discovery's labels. The capacity is written
// before a managed node is handed to KWOK (the annotation comes last), so
// that KWOK's first status keeps it.
func (c *Cluster) CreateNodes(ctx context.Context, nodes ...Node) error {
	// 16 at a time: 500 nodes join at once, as a rack does.
	var g errgroup.Group
	g.SetLimit(16)
	for _, nd := range nodes {
		g.Go(func() error { return c.createNode(ctx, nd) })
	}
	return g.Wait()
}

func (c *Cluster) createNode(ctx context.Context, nd Node) error {
	labels := map[string]string{kube.LabelGPUProduct: GPUProduct, kube.LabelGPUMemory: fmt.Sprint(GPUMemoryMiB)}
	for k, v := range nd.Labels {
		labels[k] = v
	}
	n, err := c.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nd.Name, Labels: labels},
		Spec: corev1.NodeSpec{Taints: nd.Taints}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", nd.Name, err)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods: resource.MustParse("110"), kube.ResourceGPU: *resource.NewQuantity(nd.GPUs, resource.DecimalSI),
	}
	n.Status.Capacity, n.Status.Allocatable = res, res
	if nd.Unmanaged {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	}
	if _, err := c.Kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", nd.Name, err)
	}
	if !nd.Unmanaged {
		if err := c.patchNode(ctx, nd.Name, `{"metadata":{"annotations":{"`+AnnotationManaged+`":"fake"}}}`); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) patchNode(ctx context.Context, name, patch string) error {
	_, err := c.Kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch node %s: %w", name, err)
	}
	return nil
}

// WaitReady waits until every named node is Ready.
func (c *Cluster) WaitReady(ctx context.Context, names ...string) error {
	left := map[string]bool{}
	for _, n := range names {
		left[n] = true
	}
	for {
		for n := range left {
			node, err := c.Kube.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err == nil && Ready(node) {
				delete(left, n)
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d nodes not Ready: %w", len(left), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Ready says whether the node's Ready condition is True.
func Ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NotReady has KWOK turn a managed node NotReady, as the node lifecycle
// controller does when its kubelet stops posting status.
func (c *Cluster) NotReady(ctx context.Context, name string) error {
	return c.patchNode(ctx, name, `{"metadata":{"labels":{"`+LabelNotReady+`":"true"}}}`)
}

// BackReady undoes NotReady: KWOK turns the node Ready again, as its
// kubelet would on posting status once more.
func (c *Cluster) BackReady(ctx context.Context, name string) error {
	return c.patchNode(ctx, name, `{"metadata":{"labels":{"`+LabelNotReady+`":null}}}`)
}

// Cordon marks the node unschedulable (kubectl cordon).
func (c *Cluster) Cordon(ctx context.Context, name string) error {
	return c.patchNode(ctx, name, `{"spec":{"unschedulable":true}}`)
}

// Taint adds a taint to the node.
func (c *Cluster) Taint(ctx context.Context, name string, t corev1.Taint) error {
	n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Spec.Taints = append(n.Spec.Taints, t)
	if _, err := c.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("taint node %s: %w", name, err)
	}
	return nil
}

// Untaint removes the node's taints of that key.
func (c *Cluster) Untaint(ctx context.Context, name, key string) error {
	n, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
	if _, err := c.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("untaint node %s: %w", name, err)
	}
	return nil
}
