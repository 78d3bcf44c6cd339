package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runwayhq/runway/cmd/runway/server"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/pkg/gpumetrics"
	"github.com/runwayhq/runway/pkg/runner/kubelet"
	"github.com/runwayhq/runway/services/nodemanager/agent"
	"github.com/runwayhq/runway/services/nodemanager/kube"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
)

// TestAgentKubernetesMode: the runtime places a 0.5 fraction on a KWOK
// node; the node agent in Kubernetes mode (simulated GPUs with the UUIDs
// the device plugin stand-in hands out) finds the pod's process by its
// cgroup (a real process the test starts, in a real cgroup named as the
// kubelet's systemd driver names the pod's, or a proc tree saying so where
// no cgroup v2 is writable), measures its GPU memory, reports its GPU idle
// time, serves its log, kills it when it goes over its slice, and the
// workload fails saying why.
func TestAgentKubernetesMode(t *testing.T) {
	e := newEnv(t, "kagent")
	if _, err := cluster.StartDevicePlugin(t.Context()); err != nil {
		t.Fatal(err)
	}
	const node = "kagent-node-1"
	e.node(t, node, 2)
	e.start(t)
	e.project(t, "team-k", 2)
	e.fraction(t, "team-k", "hog", 500)
	e.podRunning(t, "team-k", "hog")
	pod := e.bound(t, "hog", 1)[0]

	work := t.TempDir()
	pid, exited := startProc(t, work, "sleep", "3600")
	cg := newPodCgroups(t)
	cg.put(t, pid, string(pod.UID))
	// The kubelet's log of the pod's container (CRI lines): the agent
	// serves the text the container wrote.
	logs := t.TempDir()
	logDir := filepath.Join(logs, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), pod.Spec.Containers[0].Name)
	const cri = "2026-12-01T10:00:00.000000000Z stdout P step 1 \n2026-12-01T10:00:00.100000000Z stdout F of 10\n"
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, "0.log"), []byte(cri), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := e.runAgent(t, node, 2, agent.KubeMode{Procs: cg.config(t), LogRoot: logs})
	eventually(t, "hog's output through the workload service", func() string {
		st, err := e.rw.WorkloadService.ReadWorkloadLogs(t.Context(), &workloadv1.ReadWorkloadLogsRequest{
			Name: "projects/team-k/workloads/hog", TailLines: 10})
		if err != nil {
			return err.Error()
		}
		var got []byte
		for {
			r, err := st.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err.Error()
			}
			got = append(got, r.GetData()...)
		}
		if want := "step 1 of 10\n"; string(got) != want {
			return fmt.Sprintf("output %q, want %q", got, want)
		}
		return ""
	})

	// Within its slice (half of 79.6 GiB): measured, and left running.
	series := map[string]string{"node": kube.NodeID(node), "project": "team-k", "workload": "hog", "pod": "0"}
	if err := os.WriteFile(filepath.Join(work, simulated.MemoryFile), []byte(strconv.Itoa(30<<30)), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agent measuring the pod's 30 GiB", func() string {
		if v, ok := gauge(t, reg, "runway_gpu_memory_used_bytes", series); !ok || v != 30<<30 {
			return fmt.Sprintf("runway_gpu_memory_used_bytes %v (series there: %v)", v, ok)
		}
		return ""
	})
	// A sleeper: its GPU idle time reaches the workload's status.
	eventually(t, "hog's GPU idle time in its status", func() string {
		st := e.get(t, "team-k", "hog").GetStatus()
		if st.GetGpuIdleTime().AsDuration() <= 0 {
			return fmt.Sprintf("status %v", st)
		}
		return ""
	})
	select {
	case err := <-exited:
		t.Fatalf("the pod's process ended within its slice: %v", err)
	default:
	}

	// Over it: killed, and the workload says why.
	if err := os.WriteFile(filepath.Join(work, simulated.MemoryFile), []byte(strconv.Itoa(50<<30)), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the pod's process ended with %v, want SIGKILL", err)
		}
		exited <- err // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatal("the pod's process still runs 30 s after it went over its slice")
	}
	want := "Out of GPU memory: the pod used 50.0 GiB on GPU 0, over its slice of 39.8 GiB; the node agent ended it."
	eventually(t, "hog failed out of GPU memory", func() string {
		st := e.get(t, "team-k", "hog").GetStatus()
		ev := st.GetEvents()
		if st.GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED || len(ev) == 0 ||
			ev[len(ev)-1].GetMessage() != "Pod 0 failed (exit code 137): "+want {
			return fmt.Sprintf("status %v", st)
		}
		return ""
	})
	p, err := e.kube.CoreV1().Pods(e.ns).Get(t.Context(), pod.Name, metav1.GetOptions{})
	if err == nil && p.Annotations[kube.AnnotationEndedByAgent] != want {
		t.Errorf("pod annotations %v, want %s: %q", p.Annotations, kube.AnnotationEndedByAgent, want)
	}
}

// podCgroups is where the test puts its processes in pods, as the
// kubelet's systemd driver lays their cgroups out
// (kubepods.slice/…/kubepods-burstable-pod<uid>.slice/cri-containerd-….scope):
// under a cgroup v2 directory of the test's own, or, where no cgroup v2
// hierarchy is writable, in a proc tree whose <pid>/cgroup says so.
type podCgroups struct {
	root  string // the test's cgroup v2 directory; "" with a proc tree
	procs string // the proc tree
}

func newPodCgroups(t *testing.T) *podCgroups {
	t.Helper()
	for _, mnt := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st unix.Statfs_t
		if unix.Statfs(mnt, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
			continue
		}
		root := filepath.Join(mnt, "runway-test-"+strconv.Itoa(os.Getpid())+"-"+filepath.Base(t.TempDir()))
		if os.Mkdir(root, 0o755) != nil {
			continue
		}
		t.Cleanup(func() { removeCgroups(root) })
		return &podCgroups{root: root}
	}
	t.Log("no writable cgroup v2: the pods' processes are named in a proc tree")
	return &podCgroups{procs: t.TempDir()}
}

func podCgroupPath(uid string) string {
	return filepath.Join("kubepods.slice", "kubepods-burstable.slice", kubelet.SystemdSegment("burstable", uid),
		"cri-containerd-0123456789ab.scope")
}

// put makes process pid one of pod uid's.
func (c *podCgroups) put(t *testing.T, pid int, uid string) {
	t.Helper()
	if c.root != "" {
		dir := filepath.Join(c.root, podCgroupPath(uid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Fatal(err)
		}
		return
	}
	d := filepath.Join(c.procs, strconv.Itoa(pid))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"stat", "cwd", "comm"} {
		if err := os.Symlink(filepath.Join("/proc", strconv.Itoa(pid), f), filepath.Join(d, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(d, "cgroup"), []byte("0::/"+podCgroupPath(uid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// config is how the agent sees the node.
func (c *podCgroups) config(t *testing.T) kubelet.Config {
	if c.root != "" {
		return kubelet.Config{ProcRoot: "/proc", CgroupRoot: c.root}
	}
	return kubelet.Config{ProcRoot: c.procs, CgroupRoot: t.TempDir()}
}

// frozen reports whether pod uid's process pid is held: its cgroup frozen,
// or (proc tree) the process stopped.
func (c *podCgroups) frozen(pid int, uid string) bool {
	if c.root != "" {
		b, _ := os.ReadFile(filepath.Join(c.root, podCgroupPath(uid), "cgroup.events"))
		return strings.Contains(string(b), "frozen 1")
	}
	p, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	f := strings.Fields(string(p[strings.LastIndexByte(string(p), ')')+1:]))
	return len(f) > 0 && f[0] == "T"
}

// startProc starts a process of the test in dir until cleanup; exited gets
// how it ended.
func startProc(t *testing.T, dir string, argv ...string) (pid int, exited chan error) {
	t.Helper()
	proc := exec.Command(argv[0], argv[1:]...)
	proc.Dir = dir
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- proc.Wait() }()
	t.Cleanup(func() {
		_ = proc.Process.Kill()
		err := <-exited
		exited <- err
	})
	return proc.Process.Pid, exited
}

// runAgent runs the node's agent in Kubernetes mode, with simulated GPUs
// of the UUIDs the device plugin stand-in hands out, until cleanup.
// Its GPU metrics are in the registry it returns.
func (e *env) runAgent(t *testing.T, node string, gpus int, km agent.KubeMode) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := gpumetrics.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	sim := simulated.New(simulated.Config{Count: gpus, MemoryBytes: kwoktest.GPUMemoryMiB << 20,
		UUID: func(i int) string { return kwoktest.DeviceUUID(node, int64(i)) }})
	etcd := e.etcdClient(t)
	// The agent's pod and its token: the NodeManagerService gives it its
	// node's mark key.
	_, tok, err := cluster.AgentPod(t.Context(), e.ns, server.DefaultAgentServiceAccount, node)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(tok)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	km.Client, km.NodeName, km.Namespace = e.kube, node, e.ns
	km.NodeManager = nodemanagerv1.NewNodeManagerServiceClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- agent.Run(ctx, agent.Config{Node: kube.NodeID(node), Backend: sim, Client: etcd, Logger: quiet,
			SampleInterval: 50 * time.Millisecond, IdleWindow: 200 * time.Millisecond, Metrics: m, Listen: "127.0.0.1:0",
			Kube: &km})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Errorf("agent.Run = %v, want context.Canceled", err)
		}
	})
	return reg
}

// removeCgroups ends the processes left in the cgroup tree under root
// (cgroup.kill) and removes the tree, deepest first.
func removeCgroups(root string) {
	_ = os.WriteFile(filepath.Join(root, "cgroup.kill"), []byte("1"), 0)
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		for try := 0; try < 50 && os.Remove(dirs[i]) != nil; try++ {
			time.Sleep(20 * time.Millisecond) // the killed process leaving it
		}
	}
}

// gauge is the value of the series of name whose labels include labels.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			match := f.GetName() == name
			for k, v := range labels {
				match = match && got[k] == v
			}
			if match {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestAgentKubernetesModeTimeSlicing: two 0.5 fractions share the one GPU
// of a KWOK node whose pool slices time strictly; the agent in Kubernetes
// mode publishes the device's plan and enforces it on the pods' cgroups:
// each busy pod is seen frozen while the other runs.
func TestAgentKubernetesModeTimeSlicing(t *testing.T) {
	e := newEnv(t, "kslice")
	if _, err := cluster.StartDevicePlugin(t.Context()); err != nil {
		t.Fatal(err)
	}
	const node = "kslice-node-1"
	e.node(t, node, 1)
	e.start(t)
	if _, err := e.rw.QuotaService.UpdateNodePool(t.Context(), &quotav1.UpdateNodePoolRequest{
		NodePool:   &quotav1.NodePool{Name: "nodepools/default", TimeSlicing: &quotav1.TimeSlicing{Mode: quotav1.TimeSlicingMode_TIME_SLICING_MODE_STRICT}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"time_slicing.mode"}},
	}); err != nil {
		t.Fatal(err)
	}
	e.project(t, "team-s", 1)
	cg := newPodCgroups(t)
	type busy struct {
		pid int
		uid string
	}
	var pods []busy
	for _, id := range []string{"a", "b"} {
		e.fraction(t, "team-s", id, 500)
		e.podRunning(t, "team-s", id)
		pid, _ := startProc(t, t.TempDir(), "sh", "-c", "while :; do :; done")
		uid := string(e.bound(t, id, 1)[0].UID)
		cg.put(t, pid, uid)
		pods = append(pods, busy{pid, uid})
	}
	e.runAgent(t, node, 1, agent.KubeMode{Procs: cg.config(t)})

	eventually(t, "the node's plan published", func() string {
		p, err := e.rw.NodeManagerService.GetTimeSlicePlan(t.Context(),
			&nodemanagerv1.GetTimeSlicePlanRequest{Name: "nodes/" + kube.NodeID(node) + "/timeSlicePlan"})
		if err != nil {
			return err.Error()
		}
		if len(p.GetDevices()) != 1 || len(p.GetDevices()[0].GetSlots()) != 2 {
			return fmt.Sprintf("plan %v", p)
		}
		return ""
	})
	for i, p := range pods {
		other := pods[1-i]
		eventually(t, fmt.Sprintf("pod %d frozen while the other runs", i), func() string {
			if cg.frozen(p.pid, p.uid) && !cg.frozen(other.pid, other.uid) {
				return ""
			}
			return fmt.Sprintf("frozen: %v and %v", cg.frozen(p.pid, p.uid), cg.frozen(other.pid, other.uid))
		})
	}
}

// TestAgentKubernetesModeWholeGPU: a whole-GPU pod's device is the device
// plugin's choice, which its spec does not name; the agent asks the
// kubelet's pod-resources API (the stand-in answers with the device plugin
// stand-in's allocations) and attributes the pod's GPU memory and idle
// time to it on that device.
func TestAgentKubernetesModeWholeGPU(t *testing.T) {
	e := newEnv(t, "kwhole")
	plugin, err := cluster.StartDevicePlugin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const node = "kwhole-node-1"
	e.node(t, node, 2)
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	if err := plugin.ServePodResources(t.Context(), socket, node); err != nil {
		t.Fatal(err)
	}
	e.start(t)
	e.project(t, "team-w", 2)
	e.training(t, "team-w", "w1", 1, 1)
	e.podRunning(t, "team-w", "w1")
	var pod corev1.Pod
	eventually(t, "w1's pod given a device", func() string {
		pod = e.bound(t, "w1", 1)[0]
		if pod.Annotations[kube.AnnotationGPUUUID] == "" {
			return "no device yet"
		}
		return ""
	})
	device := strings.TrimPrefix(pod.Annotations[kube.AnnotationGPUUUID], "GPU-"+node+"-")

	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, simulated.MemoryFile), []byte(strconv.Itoa(10<<30)), 0o644); err != nil {
		t.Fatal(err)
	}
	pid, _ := startProc(t, work, "sleep", "3600")
	cg := newPodCgroups(t)
	cg.put(t, pid, string(pod.UID))
	reg := e.runAgent(t, node, 2, agent.KubeMode{Procs: cg.config(t), PodResources: socket})

	series := map[string]string{"node": kube.NodeID(node), "device": device, "project": "team-w", "workload": "w1", "pod": "0"}
	eventually(t, "w1's 10 GiB on its device "+device, func() string {
		if v, ok := gauge(t, reg, "runway_gpu_memory_used_bytes", series); !ok || v != 10<<30 {
			return fmt.Sprintf("runway_gpu_memory_used_bytes %v (series there: %v)", v, ok)
		}
		return ""
	})
	eventually(t, "w1's GPU idle time in its status", func() string {
		if st := e.get(t, "team-w", "w1").GetStatus(); st.GetGpuIdleTime().AsDuration() <= 0 {
			return fmt.Sprintf("status %v", st)
		}
		return ""
	})
}
