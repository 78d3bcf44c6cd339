package server_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/runner/local"
)

// buildRunway builds ./cmd/runway into a temporary directory.
func buildRunway(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller failed")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..") // cmd/runway/server -> module root
	bin := filepath.Join(t.TempDir(), "runway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/runway")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/runway: %v\n%s", err, out)
	}
	return bin
}

// devProc is a `runway dev` process in its own process group.
type devProc struct {
	cmd   *exec.Cmd
	out   string // its stdout and stderr
	addr  string
	token string // the administrator's, from its `export RUNWAY_TOKEN=` line
	once  sync.Once
}

// startDevProc starts `runway dev` on dir with 2 nodes × 2 GPUs on a free
// port and waits for the address on its `export RUNWAY_SERVER=` line. It is
// killed (its whole process group) at cleanup at the latest.
func startDevProc(t *testing.T, bin, dir, name string) *devProc {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, "dev", "--runtime", "process", "--data-dir", dir, "--nodes", "2", "--gpus-per-node", "2", "--listen", "127.0.0.1:0")
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devProc{cmd: cmd, out: out}
	t.Cleanup(p.kill)
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		for line := range strings.Lines(string(b)) {
			if a, ok := strings.CutPrefix(strings.TrimSpace(line), "export RUNWAY_SERVER="); ok {
				p.addr = a
			}
			if tok, ok := strings.CutPrefix(strings.TrimSpace(line), "export RUNWAY_TOKEN="); ok {
				p.token = tok
			}
		}
		if p.addr != "" && p.token != "" {
			break
		}
		if time.Now().After(deadline) {
			p.kill()
			t.Fatalf("%s: no export RUNWAY_SERVER= and RUNWAY_TOKEN= lines after 20s; output:\n%s", name, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.HasSuffix(p.addr, ":0") {
		t.Errorf("%s printed %q, not the port it listens on", name, p.addr)
	}
	return p
}

// kill sends SIGKILL to the process group and reaps the process.
func (p *devProc) kill() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Wait()
	})
}

// podProcs lists the pod processes of the agents under dir, by the pod
// directory they work in ("node-N/{workload uid}.{pod}"): each agent
// starts its pods in its runner's work directory (local.DefaultWorkDir of
// dir/nodes/node-N).
func podProcs(dir string) map[int]string {
	work := map[string]string{} // work directory → node
	nodes, _ := filepath.Glob(filepath.Join(dir, "nodes", "*"))
	for _, n := range nodes {
		work[local.DefaultWorkDir(n)+string(filepath.Separator)] = filepath.Base(n)
	}
	out := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue
		}
		for w, node := range work {
			if pod, ok := strings.CutPrefix(cwd, w); ok {
				out[pid] = node + "/" + pod
			}
		}
	}
	return out
}

// killPods kills the process groups of the pods under dir and returns how
// many processes there were.
func killPods(dir string) int {
	ps := podProcs(dir)
	for pid := range ps {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return len(ps)
}

type devClients struct {
	quota     quotav1.QuotaServiceClient
	workload  workloadv1.WorkloadServiceClient
	scheduler schedulerv1.SchedulerServiceClient
}

func dialDev(t *testing.T, addr, token string) devClients {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return devClients{quotav1.NewQuotaServiceClient(conn), workloadv1.NewWorkloadServiceClient(conn),
		schedulerv1.NewSchedulerServiceClient(conn)}
}

func submit(ctx context.Context, c devClients, project, id string) error {
	_, err := c.workload.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{
		Parent: "projects/" + project, WorkloadId: id, Workload: &workloadv1.Workload{
			Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "300"},
				Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}})
	return err
}

// TestDurabilityKill9 covers issue 3's "durability": `runway dev` (2 nodes
// × 2 GPUs) acknowledges submits of 1-GPU trainings, some of them while it
// is SIGKILLed (with its process group); started again on the same data
// directory, every acknowledged workload is there, PENDING or RUNNING, and
// over the following cycles (past the old node leases' 10 s TTL) no GPU
// (node, device index) is held by two workloads and at most 4 GPUs are
// allocated.
func TestDurabilityKill9(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc to clean up the pods")
	}
	bin := buildRunway(t)
	dir := t.TempDir()
	t.Cleanup(func() {
		if n := killPods(dir); n > 0 {
			t.Logf("killed %d pod process(es) left at cleanup", n)
		}
	})

	p1 := startDevProc(t, bin, dir, "first")
	c := dialDev(t, p1.addr, p1.token)
	for _, pr := range []string{"team-a", "team-b"} {
		deserved := int64(2000)
		if _, err := c.quota.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: pr, Project: &quotav1.Project{
			NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
				Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}}}); err != nil {
			t.Fatalf("CreateProject(%s): %v", pr, err)
		}
	}
	var mu sync.Mutex
	var acked []string // project/id
	for i := range 20 {
		pr, id := []string{"team-a", "team-b"}[i%2], fmt.Sprintf("w%02d", i)
		if err := submit(t.Context(), c, pr, id); err != nil {
			t.Fatalf("submit %s/%s: %v", pr, id, err)
		}
		acked = append(acked, pr+"/"+id)
	}
	nRunning := func(c devClients, names []string) (int, map[string]workloadv1.WorkloadPhase, error) {
		ph := map[string]workloadv1.WorkloadPhase{}
		n := 0
		for _, name := range names {
			pr, id, _ := strings.Cut(name, "/")
			w, err := c.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/" + pr + "/workloads/" + id})
			if err != nil {
				return 0, nil, fmt.Errorf("%s: %w", name, err)
			}
			ph[name] = w.GetStatus().GetPhase()
			if ph[name] == running {
				n++
			}
		}
		return n, ph, nil
	}
	eventually(t, "4 workloads RUNNING", func() string {
		n, ph, err := nRunning(c, acked)
		if err != nil {
			return err.Error()
		}
		if n != 4 {
			return fmt.Sprintf("%d running: %v", n, ph)
		}
		return ""
	})
	t.Logf("pods before the kill: %v", podProcs(dir))

	// More submits race the kill: those acknowledged must survive it.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 20; ctx.Err() == nil && i < 200; i++ {
			pr, id := []string{"team-a", "team-b"}[i%2], fmt.Sprintf("w%03d", i)
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			err := submit(cctx, c, pr, id)
			ccancel()
			if err == nil {
				mu.Lock()
				acked = append(acked, pr+"/"+id)
				mu.Unlock()
			}
		}
	}()
	time.Sleep(150 * time.Millisecond)
	p1.kill()
	cancel()
	<-done
	orphans := podProcs(dir)
	if len(orphans) > 0 {
		// Pods run in sessions of their own, each the child of its shim, so
		// they outlive a kill -9 of the agent; the restarted agent adopts
		// those still bound and ends the others (checked at the end).
		t.Logf("%d pod process(es) outlived the SIGKILL of runway dev's process group: %v", len(orphans), orphans)
	}
	t.Logf("%d submits acknowledged", len(acked))

	p2 := startDevProc(t, bin, dir, "second")
	c2 := dialDev(t, p2.addr, p2.token)
	eventually(t, "every acknowledged workload back, PENDING or RUNNING", func() string {
		_, ph, err := nRunning(c2, acked)
		if err != nil {
			return err.Error()
		}
		for n, p := range ph {
			if p != running && p != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING {
				return fmt.Sprintf("%s is %v", n, p)
			}
		}
		return ""
	})

	// Watch the bindings for 12 s (past the dead agents' 10 s leases).
	start := time.Now()
	var maxRunning int
	for time.Since(start) < 12*time.Second {
		held := map[string]string{} // nodes/N#dev -> workload
		var gpus int
		for _, name := range acked {
			pr, id, _ := strings.Cut(name, "/")
			w, err := c2.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/" + pr + "/workloads/" + id})
			if err != nil {
				t.Fatalf("GetWorkload(%s) after restart: %v", name, err)
			}
			st := w.GetStatus()
			if ph := st.GetPhase(); ph != running && ph != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING {
				t.Errorf("%s is %v after restart", name, ph)
			}
			for _, pod := range st.GetPods() {
				switch pod.GetState() {
				case workloadv1.PodState_POD_STATE_SUCCEEDED, workloadv1.PodState_POD_STATE_FAILED:
					continue
				}
				for _, d := range pod.GetDeviceIndexes() {
					k := fmt.Sprintf("%s#%d", pod.GetNode(), d)
					if other, ok := held[k]; ok {
						t.Fatalf("GPU %s held by both %s and %s (%v)", k, other, name, st)
					}
					held[k] = name
					gpus++
				}
			}
		}
		if gpus > 4 {
			t.Fatalf("%d GPUs held, more than the 4 there are: %v", gpus, held)
		}
		qs, err := c2.scheduler.ListQueues(t.Context(), &schedulerv1.ListQueuesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var alloc int64
		for _, q := range qs.GetQueues() {
			if strings.HasPrefix(q.GetName(), "projects/") { // not the departments' parent queues
				alloc += pool(q).GetAllocated().GetMilliGpus()
			}
		}
		if alloc > 4000 {
			var qd []string
			for _, q := range qs.GetQueues() {
				qd = append(qd, fmt.Sprintf("%s allocated %d", q.GetName(), pool(q).GetAllocated().GetMilliGpus()))
			}
			_, ph, _ := nRunning(c2, acked)
			var run []string
			for n, p := range ph {
				if p == running {
					run = append(run, n)
				}
			}
			t.Fatalf("%v after restart: queues' allocation %d milli-GPUs, more than the 4 GPUs there are: %v; "+
				"held per WorkloadService status %v; RUNNING %v; pod processes %v",
				time.Since(start).Round(time.Millisecond), alloc, qd, held, run, podProcs(dir))
		}
		n, _, _ := nRunning(c2, acked)
		maxRunning = max(maxRunning, n)
		time.Sleep(250 * time.Millisecond)
	}
	n, ph, err := nRunning(c2, acked)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("%d workloads RUNNING after restart, want 4: %v", n, ph)
	}
	procs := podProcs(dir)
	t.Logf("after restart: %d RUNNING (at most %d), pod processes: %v", n, maxRunning, procs)
	perPod := map[string]int{}
	for _, cwd := range procs {
		perPod[cwd]++
	}
	for cwd, k := range perPod {
		if k > 1 {
			t.Errorf("pod %s runs %d processes after the restart; the orphan from before the kill was not reaped", cwd, k)
		}
	}
	if len(procs) > maxRunning {
		t.Errorf("%d pod processes for at most %d running workloads: %v", len(procs), maxRunning, procs)
	}
}
