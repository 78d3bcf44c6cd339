//go:build k8sbench

package kubebench_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// GPUsPerNode is each fake node's nvidia.com/gpu.
const GPUsPerNode = 8

// kwokPodParallelism is how many pods KWOK moves through their stages at
// once (its default is 4): as many as the bench creates pods at once.
const kwokPodParallelism = 64

// cluster is a kube-apiserver on its own etcd, with KWOK playing every
// node's kubelet, all of them processes of the repository's bin/.
type cluster struct {
	dir        string
	kubeconfig string
	kube       kubernetes.Interface
	procs      map[string]*process // by name: etcd, kube-apiserver, kwok
}

const token = "runway-bench-admin"

// bin is a binary of the repository's bin/ (make test-bins, kwok, kube-scheduler).
func bin(b *testing.B, name string) string {
	b.Helper()
	p, err := filepath.Abs(filepath.Join("../../../bin", name))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		b.Fatalf("%s is missing (%v): `make bench-k8s` builds it", p, err)
	}
	return p
}

// kwokStages is KWOK's fast stages: nodes Ready at once, bound pods Running
// at once, deleted pods gone at once.
func kwokStages(b *testing.B) []string {
	b.Helper()
	dir := os.Getenv("RUNWAY_KWOK_STAGES")
	if dir == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			b.Fatalf("go env GOMODCACHE: %v", err)
		}
		dir = filepath.Join(strings.TrimSpace(string(out)), "sigs.k8s.io/kwok@v0.8.0/kustomize/stage")
	}
	var args []string
	for _, s := range []string{"node/fast/node-initialize.yaml", "pod/fast/pod-ready.yaml", "pod/fast/pod-delete.yaml"} {
		p := filepath.Join(dir, s)
		if _, err := os.Stat(p); err != nil {
			b.Fatalf("KWOK stage %s: %v (set RUNWAY_KWOK_STAGES to kwok's kustomize/stage)", p, err)
		}
		args = append(args, "-c", p)
	}
	return args
}

func startCluster(b *testing.B, nodes int) *cluster {
	b.Helper()
	// RUNWAY_BENCH_DIR keeps the processes' logs and data after the run.
	dir := os.Getenv("RUNWAY_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	c := &cluster{dir: dir, procs: map[string]*process{}}
	b.Cleanup(func() {
		for _, n := range []string{"kwok", "kube-apiserver", "etcd"} {
			if p := c.procs[n]; p != nil {
				p.stop()
			}
		}
	})
	etcdPort, peerPort, apiPort := freePort(b), freePort(b), freePort(b)
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	c.procs["etcd"] = c.start(b, "etcd", bin(b, "etcd"), "--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--unsafe-no-fsync", "--quota-backend-bytes", strconv.Itoa(8<<30),
		"--log-level", "error")

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	host := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	files := map[string][]byte{
		"sa.key":     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub":     pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv": []byte(token + ",admin,admin-uid,system:masters\n"),
		"kubeconfig": fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: %q}}]
contexts: [{name: bench, context: {cluster: bench, user: admin}}]
current-context: bench
`, host, token),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(c.dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	// The flags of ../shared/TOOLCHAIN.md §4.
	c.procs["kube-apiserver"] = c.start(b, "kube-apiserver", bin(b, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--secure-port="+strconv.Itoa(apiPort), "--cert-dir="+filepath.Join(c.dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(c.dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(c.dir, "sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16",
		"--token-auth-file="+filepath.Join(c.dir, "tokens.csv"), "--authorization-mode=AlwaysAllow",
		// No controller-manager runs: nothing would create service accounts
		// or lift the not-ready taint TaintNodesByCondition puts on new nodes.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition")
	c.waitReady(b, host)
	// The bench's own client: no client-side limit, so that it never is
	// what is measured.
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: host, BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	c.kube = cs
	// A real cluster has a kubelet per node, each starting its own pods;
	// KWOK plays them all and by default plays 4 pod stages at a time, so
	// that at a few hundred pods a second the fake kubelets, not the
	// scheduler, set the pace for both. It plays kwokPodParallelism (a
	// configuration file sets every parallelism; the others are KWOK's
	// defaults).
	kwokConf := filepath.Join(c.dir, "kwok.yaml")
	if err := os.WriteFile(kwokConf, fmt.Appendf(nil, `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: %d
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
`, kwokPodParallelism), 0o600); err != nil {
		b.Fatal(err)
	}
	c.procs["kwok"] = c.start(b, "kwok", bin(b, "kwok"), append([]string{"--kubeconfig", c.kubeconfig,
		"--manage-all-nodes=true", "--server-address", "127.0.0.1:0", "-c", kwokConf}, kwokStages(b)...)...)
	c.createNodes(b, nodes)
	return c
}

func (c *cluster) waitReady(b *testing.B, host string) {
	b.Helper()
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, _ := http.NewRequest(http.MethodGet, host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := hc.Do(req); err == nil {
			ok := resp.StatusCode == http.StatusOK
			_ = resp.Body.Close()
			if ok {
				return
			}
		}
		if time.Now().After(deadline) || c.procs["kube-apiserver"].exited() {
			b.Fatalf("kube-apiserver not ready; its log:\n%s", c.procs["kube-apiserver"].tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// createNodes creates n nodes of GPUsPerNode GPUs (bench-node-00001...)
// with GPU feature discovery's labels, and waits until KWOK has made every
// one Ready.
func (c *cluster) createNodes(b *testing.B, n int) {
	b.Helper()
	ctx := b.Context()
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods: resource.MustParse("110"), kube.ResourceGPU: *resource.NewQuantity(GPUsPerNode, resource.DecimalSI),
	}
	status, err := json.Marshal(map[string]any{"status": corev1.NodeStatus{Capacity: res, Allocatable: res}})
	if err != nil {
		b.Fatal(err)
	}
	err = parallel(n, 32, func(i int) error {
		node, err := c.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("bench-node-%05d", i),
			Labels:      map[string]string{kube.LabelGPUProduct: "NVIDIA-H100-80GB-HBM3", kube.LabelGPUMemory: "81559"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		// A merge patch: KWOK may have written the status already.
		_, err = c.kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, status, metav1.PatchOptions{}, "status")
		return err
	})
	if err != nil {
		b.Fatalf("create nodes: %v", err)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		l, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, node := range l.Items {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d nodes Ready after 5 minutes; kwok's log:\n%s", ready, n, c.procs["kwok"].tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deletePods deletes every pod of the namespace at once (KWOK's kubelets
// need no grace) and waits until they are gone.
func (c *cluster) deletePods(b *testing.B, ns string) {
	b.Helper()
	ctx := b.Context()
	zero := int64(0)
	deadline := time.Now().Add(15 * time.Minute)
	for {
		// Tens of thousands of pods outlast one request's timeout (60 s):
		// the apiserver deletes on, and the next round takes the rest.
		err := c.kube.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
			metav1.ListOptions{})
		l, lerr := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil && lerr == nil && len(l.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("pods of %s still there after 15 minutes (%v, %v)", ns, err, lerr)
		}
		time.Sleep(time.Second)
	}
}

func (c *cluster) namespace(b *testing.B, name string) string {
	b.Helper()
	if _, err := c.kube.CoreV1().Namespaces().Create(b.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
		metav1.CreateOptions{}); err != nil {
		b.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// cpu is the CPU time the cluster's processes have used so far, by name.
func (c *cluster) cpu() map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, p := range c.procs {
		out[name] = p.cpu()
	}
	return out
}

// process is a child process, its output in log, killed with the test
// binary (Pdeathsig).
type process struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
}

func (c *cluster) start(b *testing.B, name, path string, args ...string) *process {
	b.Helper()
	return startProcess(b, c.dir, name, path, args...)
}

func startProcess(b *testing.B, dir, name, path string, args ...string) *process {
	b.Helper()
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	p := &process{name: name, log: log.Name(), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = log.Close(); close(p.done) }()
	return p
}

// tail is the end of the process's log, for a failure's message.
func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	return string(b[max(len(b)-4000, 0):])
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpu is the process's user+system time (/proc/PID/stat, in clock ticks
// of 10 ms).
func (p *process) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses: state is
	// field 3, utime 14 and stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

// running counts the pods of a namespace that have gone Running, through a
// watch (an informer), and tells when the count reaches want.
type running struct {
	want  int
	mu    sync.Mutex
	seen  map[string]bool
	count atomic.Int64
	at    time.Time
	done  chan struct{}
	stop  context.CancelFunc
	// The timeline: the first and last pod created, the first Running.
	firstCreate, lastCreate, firstRunning time.Time
}

// timeline is when pods were created and went Running, from start.
func (r *running) timeline(start time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := func(t time.Time) time.Duration { return t.Sub(start).Round(10 * time.Millisecond) }
	return fmt.Sprintf("created %v..%v running %v..%v", d(r.firstCreate), d(r.lastCreate), d(r.firstRunning), d(r.at))
}

func watchRunning(b *testing.B, cs kubernetes.Interface, ns string, want int) *running {
	b.Helper()
	ctx, cancel := context.WithCancel(b.Context())
	r := &running{want: want, seen: map[string]bool{}, done: make(chan struct{}), stop: cancel}
	opt := informers.WithNamespace(ns)
	if ns == "" { // Runway's pods, in every project's namespace
		opt = informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = kube.LabelWorkload })
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, opt)
	inf := f.Core().V1().Pods().Informer()
	var see func(obj any)
	added := func(obj any) {
		now := time.Now()
		r.mu.Lock()
		if r.firstCreate.IsZero() {
			r.firstCreate = now
		}
		r.lastCreate = now
		r.mu.Unlock()
		see(obj)
	}
	see = func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.seen[p.Namespace+"/"+p.Name] {
			return
		}
		if len(r.seen) == 0 {
			r.firstRunning = time.Now()
		}
		r.seen[p.Namespace+"/"+p.Name] = true
		if n := r.count.Add(1); int(n) == r.want {
			r.at = time.Now()
			close(r.done)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: added, UpdateFunc: func(_, obj any) { see(obj) }}); err != nil {
		b.Fatal(err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	b.Cleanup(func() { cancel(); f.Shutdown() })
	return r
}

// wait returns when the last wanted pod went Running.
func (r *running) wait(b *testing.B, what string, timeout time.Duration) time.Time {
	b.Helper()
	select {
	case <-r.done:
		r.stop()
		return r.at
	case <-time.After(timeout):
		b.Fatalf("%s: %d of %d pods Running after %v", what, r.count.Load(), r.want, timeout)
	case <-b.Context().Done():
		b.Fatal(b.Context().Err())
	}
	return time.Time{}
}

// parallel runs fn(0..n-1) on workers goroutines; the first error stops it.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = fmt.Errorf("item %d: %w", i, err); failed.Store(true) })
				}
			}
		})
	}
	wg.Wait()
	return first
}

func freePort(b *testing.B) int {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
