//go:build k8sbench

package kubebench_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwayhq/runway/cmd/runway/server"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// The client limits both schedulers get: what a large cluster gives
// kube-scheduler, and the Kubernetes runtime's defaults.
const (
	clientQPS   = server.DefaultKubeQPS
	clientBurst = server.DefaultKubeBurst
	// projectPods: a project holds at most 5,000 workloads
	// (workload.DefaultMaxWorkloadsPerProject), so the trainings are spread
	// over projects of this many.
	projectPods = 2500
	timeout     = 30 * time.Minute
)

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// BenchmarkK8sScheduling schedules the same PODS one-GPU pods on NODES KWOK
// nodes of 8 GPUs through one kube-apiserver, first by kube-scheduler, then
// by Runway's Kubernetes runtime (the apiserver has by then seen the first
// round, which favours no one but the first), and reports each one's pods
// bound per second, from the first create to the last pod Running.
// RUNWAY_BENCH_CPUPROFILE names a file for the CPU profile of Runway's
// round (the whole Runway process: API, scheduler, runtime, its etcd).
func BenchmarkK8sScheduling(b *testing.B) {
	nodes := envInt(b, "RUNWAY_BENCH_NODES", 1000)
	pods := envInt(b, "RUNWAY_BENCH_PODS", 10000)
	c := startCluster(b, nodes)
	want := min(pods, nodes*GPUsPerNode) // the pods that fit
	for i := range b.N {
		b.StopTimer()
		ks, ksCPU := c.kubeScheduler(b, fmt.Sprintf("bench-kube-%d", i), pods, want)
		fmt.Printf("k8s-bench-round: kube-scheduler %.0f/s (%d pods Running in %v)\n", float64(want)/ks.Seconds(), want, ks.Round(time.Millisecond))
		rw, rwCPU := c.runway(b, fmt.Sprintf("bench-runway-%d", i), pods, want)
		ksRate, rwRate := float64(want)/ks.Seconds(), float64(want)/rw.Seconds()
		b.ReportMetric(rwRate, "runway-pods/s")
		b.ReportMetric(ksRate, "kube-scheduler-pods/s")
		b.ReportMetric(rwRate/ksRate, "ratio")
		fmt.Printf("k8s-bench: nodes=%d pods=%d runway=%.0f/s kube-scheduler=%.0f/s ratio=%.2f\n",
			nodes, pods, rwRate, ksRate, rwRate/ksRate)
		fmt.Printf("k8s-bench-detail: bound=%d\n  runway %v: %s\n  kube-scheduler %v: %s\n",
			want, rw.Round(time.Millisecond), rwCPU, ks.Round(time.Millisecond), ksCPU)
		b.StartTimer()
	}
}

// kubeScheduler runs bin/kube-scheduler, creates the pods in ns and
// returns the time from the first create to the want-th pod Running, and
// the CPU the processes used meanwhile.
func (c *cluster) kubeScheduler(b *testing.B, ns string, pods, want int) (time.Duration, string) {
	b.Helper()
	ctx := b.Context()
	c.namespace(b, ns)
	cfg := filepath.Join(c.dir, "kube-scheduler.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, c.kubeconfig, clientQPS, clientBurst), 0o600); err != nil {
		b.Fatal(err)
	}
	ksched := startProcess(b, c.dir, "kube-scheduler", bin(b, "kube-scheduler"), "--config", cfg,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(freePort(b)))
	defer ksched.stop()
	// Ready once it binds a pod: its informers have synced.
	probe := gpuPod(ns, "probe")
	if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		p, err := c.kube.CoreV1().Pods(ns).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			break
		}
		if time.Now().After(deadline) || ksched.exited() {
			b.Fatalf("kube-scheduler bound no pod; its log:\n%s", ksched.tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.deletePods(b, ns)

	r := watchRunning(b, c.kube, ns, want)
	cpu0, self0 := c.cpu(), selfCPU()
	ks0 := ksched.cpu()
	start := time.Now()
	if err := parallel(pods, 64, func(i int) error {
		_, err := c.kube.CoreV1().Pods(ns).Create(ctx, gpuPod(ns, fmt.Sprintf("p-%05d", i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		b.Fatalf("create pods: %v", err)
	}
	took := r.wait(b, "kube-scheduler", timeout).Sub(start)
	cpu := r.timeline(start) + " cpu: " + c.cpuSince(cpu0) + fmt.Sprintf(" kube-scheduler=%v bench=%v", (ksched.cpu()-ks0).Round(time.Second),
		(selfCPU()-self0).Round(time.Second))
	ksched.stop()
	c.deletePods(b, ns)
	return took, cpu
}

// gpuPod is a pod for kube-scheduler asking what Runway's trainings ask.
func gpuPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "main", Image: "busybox", Command: []string{"sleep", "3600"},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("100Mi"), kube.ResourceGPU: resource.MustParse("1")},
				Limits: corev1.ResourceList{kube.ResourceGPU: resource.MustParse("1")},
			},
		}}},
	}
}

// runway runs Runway (server.RunDev with the Kubernetes runtime, its
// default client limits and workers), waits until it has registered every
// node, submits the trainings and returns the time from the first submit
// to the want-th pod Running, and the CPU used meanwhile.
func (c *cluster) runway(b *testing.B, ns string, pods, want int) (time.Duration, string) {
	b.Helper()
	c.namespace(b, ns)
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	logf, err := os.Create(filepath.Join(c.dir, "runway.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	cfg := server.DevConfig{DataDir: b.TempDir(), Listen: "127.0.0.1:0",
		Logger:      slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelWarn})),
		EtcdOptions: []etcdtest.Option{etcdtest.WithLogger(zap.NewNop())},
		Kube:        &server.KubeConfig{Kubeconfig: c.kubeconfig, Namespace: ns}}
	go func() { done <- server.RunDev(ctx, cfg, func(addr, token string) { ready <- [2]string{addr, token} }) }()
	var at [2]string
	select {
	case at = <-ready:
	case err := <-done:
		b.Fatalf("RunDev: %v", err)
	case <-time.After(time.Minute):
		b.Fatal("RunDev not ready after a minute")
	}
	rw, err := sdk.Dial(ctx, sdk.Config{Server: at[0], Token: at[1]})
	if err != nil {
		b.Fatal(err)
	}
	defer rw.Close()
	c.waitRegistered(b, rw)
	for j := 0; j*projectPods < pods; j++ {
		deserved := int64(min(projectPods, pods-j*projectPods)) * 1000
		if _, err := rw.CreateProject(ctx, fmt.Sprintf("bench-%d", j), &quotav1.Project{
			NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
				Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}}); err != nil {
			b.Fatalf("create project: %v", err)
		}
	}

	// Runway's pods run in their projects' namespaces.
	r := watchRunning(b, c.kube, "", want)
	if p := os.Getenv("RUNWAY_BENCH_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	memProfile(b, ".base")
	cpu0, self0 := c.cpu(), selfCPU()
	start := time.Now()
	spec := &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, Pods: 1,
		MilliCpu: 100, MemoryBytes: 100 << 20, Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}
	if err := parallel(pods, 64, func(i int) error {
		_, err := rw.SubmitWorkload(ctx, fmt.Sprintf("bench-%d", i/projectPods), fmt.Sprintf("t-%05d", i),
			workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, spec)
		return err
	}); err != nil {
		b.Fatalf("submit trainings: %v", err)
	}
	submitted := time.Since(start)
	took := r.wait(b, "runway", timeout).Sub(start)
	cpu := fmt.Sprintf("submitted %v, ", submitted.Round(10*time.Millisecond)) + r.timeline(start) + " cpu: " +
		c.cpuSince(cpu0) + fmt.Sprintf(" runway+bench=%v", (selfCPU()-self0).Round(time.Second))
	pprof.StopCPUProfile()
	memProfile(b, "")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			b.Errorf("RunDev: %v", err)
		}
	case <-time.After(time.Minute):
		b.Error("RunDev did not stop within a minute")
	}
	c.deletePods(b, ns)
	for j := 0; j*projectPods < pods; j++ {
		c.deletePods(b, kube.ProjectNamespace(fmt.Sprintf("bench-%d", j)))
	}
	return took, cpu
}

// memProfile writes the allocations so far to RUNWAY_BENCH_MEMPROFILE plus
// suffix, if set: the bench writes one before Runway's round (".base") and
// one after, so that `go tool pprof -sample_index=alloc_space -base X.base X`
// shows what the round allocated.
func memProfile(b *testing.B, suffix string) {
	b.Helper()
	p := os.Getenv("RUNWAY_BENCH_MEMPROFILE")
	if p == "" {
		return
	}
	f, err := os.Create(p + suffix)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatalf("write %s: %v", f.Name(), err)
	}
}

// waitRegistered waits until Runway lists every Kubernetes node as Ready.
func (c *cluster) waitRegistered(b *testing.B, rw *sdk.Client) {
	b.Helper()
	l, err := c.kube.CoreV1().Nodes().List(b.Context(), metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ready := 0
		for n, err := range rw.Nodes(b.Context(), "") {
			if err != nil && !apierrors.IsNotFound(err) {
				b.Fatalf("list Runway's nodes: %v", err)
			}
			if n.GetReadiness() == nodemanagerv1.Readiness_READINESS_READY {
				ready++
			}
		}
		if ready == len(l.Items) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("Runway lists %d of %d nodes Ready after 5 minutes", ready, len(l.Items))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *cluster) cpuSince(before map[string]time.Duration) string {
	now := c.cpu()
	return fmt.Sprintf("kube-apiserver=%v etcd=%v kwok=%v", (now["kube-apiserver"] - before["kube-apiserver"]).Round(time.Second),
		(now["etcd"] - before["etcd"]).Round(time.Second), (now["kwok"] - before["kwok"]).Round(time.Second))
}

// selfCPU is the CPU time of this process (Runway runs in it).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
