//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/runner/local"
)

// runwayBin is the runway binary built by TestMain into a temporary
// directory, so that `go test ./...` alone is enough.
var runwayBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "runway-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	runwayBin = filepath.Join(dir, "runway")
	build := exec.Command("go", "build", "-o", runwayBin, "github.com/runwayhq/runway/cmd/runway")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build cmd/runway: %v\n%s", err, out)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			return 1
		}
	}
	return code
}

// repoRoot is the module root (two levels above this package).
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// etcdBin is bin/etcd, or the test is skipped.
func etcdBin(t *testing.T) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "bin", "etcd")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("standalone etcd %s is missing (%v): run `make test-bins` to build it", p, err)
	}
	return p
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// lockedBuffer collects a process's output for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.b.String()
	if len(s) > 4000 {
		s = "…" + s[len(s)-4000:]
	}
	return s
}

// proc is a child process in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	err  error
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process (it stops its own children, e.g. an
// agent's pods), waits up to grace, then SIGKILLs its whole process group.
func (p *proc) stop(t *testing.T, grace time.Duration) {
	t.Helper()
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			t.Errorf("%s did not stop within %v of SIGTERM; killing its process group", p.name, grace)
		}
	}
	// Whatever is left in the group (nothing, normally) goes too.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// start runs bin with args in its own process group; t.Cleanup stops it.
// Processes are stopped in reverse order of start (t.Cleanup is LIFO).
func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = repoRoot(t)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t, 15*time.Second)
		if t.Failed() {
			t.Logf("--- %s output (%v):\n%s", name, p.err, out.String())
		}
	})
	return p
}

// eventually polls cond every 50 ms until it returns "" (met), failing with
// its last answer after timeout; it also fails as soon as one of procs exits.
func eventually(t *testing.T, timeout time.Duration, what string, procs []*proc, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		why := cond()
		if why == "" {
			return
		}
		for _, p := range procs {
			if p.exited() {
				t.Fatalf("waiting for %s: %s exited (%v):\n%s", what, p.name, p.err, p.out.String())
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, why)
		}
		<-tick.C
	}
}

// token is the bearer token every client of the test sends; it is set once
// the identity service is up and the administrator has signed in.
var token string

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(bearer{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// bearer sends the current token (health checks need none).
type bearer struct{}

func (bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if token == "" {
		return nil, nil
	}
	return map[string]string{"authorization": "Bearer " + token}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }

// serving waits until the gRPC health service at conn reports SERVING.
func serving(t *testing.T, p *proc, conn *grpc.ClientConn) {
	t.Helper()
	h := healthpb.NewHealthClient(conn)
	eventually(t, 20*time.Second, p.name+" serving", []*proc{p}, func() string {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		r, err := h.Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err.Error()
		}
		if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return r.GetStatus().String()
		}
		return ""
	})
}

// leftovers lists the processes whose working directory is under one of
// dirs (the agents' work directories, where they run their pods), as "pid
// cmdline", and kills them.
func leftovers(dirs ...string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || !slices.ContainsFunc(dirs, func(dir string) bool {
			return strings.HasPrefix(cwd, dir+string(filepath.Separator)) || cwd == dir
		}) {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cl), "\x00", " ")))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return out
}

// startEtcd runs bin/etcd on loopback with its data in dir and waits until
// it is healthy; it returns its client address.
func startEtcd(t *testing.T, dir string) (string, *proc) {
	t.Helper()
	etcd := etcdBin(t)
	clientAddr, peerAddr := freeAddr(t), freeAddr(t)
	clientURL, peerURL := "http://"+clientAddr, "http://"+peerAddr
	etcdProc := start(t, "etcd", etcd, "--name", "e2e", "--data-dir", dir,
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e2e="+peerURL, "--initial-cluster-state", "new",
		"--unsafe-no-fsync", "--log-level", "error")
	eventually(t, 20*time.Second, "etcd healthy", []*proc{etcdProc}, func() string {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			return err.Error()
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(b), `"health":"true"`) {
			return string(b)
		}
		return ""
	})
	return clientAddr, etcdProc
}

// oneTimePassword waits until the identity service p has printed the
// bootstrap administrator's one-time password.
func oneTimePassword(t *testing.T, p *proc) string {
	t.Helper()
	var password string
	eventually(t, 10*time.Second, "the one-time password", []*proc{p}, func() string {
		for line := range strings.Lines(p.out.String()) {
			if _, pw, ok := strings.Cut(strings.TrimSpace(line), "one-time password: "); ok {
				password = pw
				return ""
			}
		}
		return "not printed yet"
	})
	return password
}

// TestQuickStartMultiProcess is the product quick start with every part of
// the control plane as its own process: a standalone etcd, `runway serve`
// quota, workload, two scheduler replicas and nodemanager, and two
// `runway agent` nodes with 2 simulated GPUs each. team-a and team-b deserve
// 2 GPUs each; a1 (1), a2 (2) and b1 (1) run, team-a over its quota. b2 (1)
// reclaims team-b's quota: a1 goes back to PENDING with a PREEMPTED event
// naming b2, and both queues hold 2 GPUs.
func TestQuickStartMultiProcess(t *testing.T) {
	tmp := t.TempDir()
	agentsDir := filepath.Join(tmp, "agents")

	// Checked last (t.Cleanup is LIFO): every agent has stopped by then.
	t.Cleanup(func() {
		work := []string{local.DefaultWorkDir(filepath.Join(agentsDir, "node-1")), local.DefaultWorkDir(filepath.Join(agentsDir, "node-2"))}
		if left := leftovers(work...); len(left) > 0 {
			t.Errorf("processes left running in the agents' work directories (killed now): %v", left)
		}
	})

	clientAddr, etcdProc := startEtcd(t, filepath.Join(tmp, "etcd"))
	all := []*proc{etcdProc}

	serve := func(name string, args ...string) (string, *grpc.ClientConn) {
		addr := freeAddr(t)
		p := start(t, name, runwayBin, append([]string{"serve", args[0], "--etcd-endpoints", clientAddr,
			"--listen", addr}, args[1:]...)...)
		conn := dial(t, addr)
		serving(t, p, conn)
		all = append(all, p)
		return addr, conn
	}
	// The identity service creates the administrator and prints its
	// one-time password; signing in with it (setting a new one) gives the
	// token every other call carries.
	identityAddr, identityConn := serve("identity", "identity")
	password := oneTimePassword(t, all[len(all)-1])
	login, err := identityv1.NewIdentityServiceClient(identityConn).Login(t.Context(), &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_Password{Password: &identityv1.PasswordCredentials{
			User: "admin", Password: password, NewPassword: "the administrator's own password"}}})
	if err != nil {
		t.Fatalf("Login at %s: %v", identityAddr, err)
	}
	token = login.GetAccessToken()
	t.Cleanup(func() { token = "" })
	quotaAddr, quotaConn := serve("quota", "quota")
	_, workloadConn := serve("workload", "workload", "--quota-server", quotaAddr)
	_, sched1 := serve("scheduler-1", "scheduler", "--replica", "sched-1")
	_, sched2 := serve("scheduler-2", "scheduler", "--replica", "sched-2")
	serve("nodemanager", "nodemanager")
	for _, n := range []string{"node-1", "node-2"} {
		p := start(t, "agent "+n, runwayBin, "agent", "--runtime", "process", "--node", n, "--gpus", "2",
			"--etcd-endpoints", clientAddr, "--data-dir", filepath.Join(agentsDir, n))
		all = append(all, p)
	}

	quota := quotav1.NewQuotaServiceClient(quotaConn)
	workload := workloadv1.NewWorkloadServiceClient(workloadConn)
	schedulers := []schedulerv1.SchedulerServiceClient{
		schedulerv1.NewSchedulerServiceClient(sched1), schedulerv1.NewSchedulerServiceClient(sched2)}

	for _, p := range []string{"team-a", "team-b"} {
		deserved := int64(2000)
		if _, err := quota.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: p,
			Project: &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
				Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}}}); err != nil {
			t.Fatalf("CreateProject(%s): %v", p, err)
		}
	}
	training := func(project, id string, gpus int32) {
		t.Helper()
		if _, err := workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
			Parent: "projects/" + project, WorkloadId: id, Workload: &workloadv1.Workload{
				Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
				Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "300"},
					Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: gpus}}}}}); err != nil {
			t.Fatalf("CreateWorkload(%s/%s): %v", project, id, err)
		}
	}
	// phases are the workloads' phases in the WorkloadService (the agents'
	// reports folded in by its status controller).
	phases := func(names ...string) (map[string]workloadv1.WorkloadPhase, string) {
		out := map[string]workloadv1.WorkloadPhase{}
		for _, n := range names {
			project, id, _ := strings.Cut(n, "/")
			w, err := workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{
				Name: "projects/" + project + "/workloads/" + id})
			if err != nil {
				return nil, fmt.Sprintf("GetWorkload(%s): %v", n, err)
			}
			out[n] = w.GetStatus().GetPhase()
		}
		return out, ""
	}
	const runningPhase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING

	training("team-a", "a1", 1)
	training("team-a", "a2", 2)
	training("team-b", "b1", 1)
	eventually(t, 30*time.Second, "a1, a2 and b1 RUNNING", all, func() string {
		ph, why := phases("team-a/a1", "team-a/a2", "team-b/b1")
		if why != "" {
			return why
		}
		for _, n := range []string{"team-a/a1", "team-a/a2", "team-b/b1"} {
			if ph[n] != runningPhase {
				return fmt.Sprintf("phases %v", ph)
			}
		}
		return ""
	})

	training("team-b", "b2", 1)
	var a1 *workloadv1.Workload
	eventually(t, 30*time.Second, "a2, b1, b2 RUNNING and a1 PENDING with a PREEMPTED event", all, func() string {
		ph, why := phases("team-a/a2", "team-b/b1", "team-b/b2")
		if why != "" {
			return why
		}
		for _, n := range []string{"team-a/a2", "team-b/b1", "team-b/b2"} {
			if ph[n] != runningPhase {
				return fmt.Sprintf("phases %v", ph)
			}
		}
		var err error
		a1, err = workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/a1"})
		if err != nil {
			return err.Error()
		}
		if a1.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING ||
			a1.GetStatus().GetPreemptionCount() == 0 {
			return fmt.Sprintf("a1 status %v", a1.GetStatus())
		}
		return ""
	})
	evs := a1.GetStatus().GetEvents()
	if i := slices.IndexFunc(evs, func(e *workloadv1.WorkloadEvent) bool {
		return e.GetType() == workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED
	}); i < 0 || evs[i].GetBy() != "projects/team-b" {
		t.Errorf("a1's events %v, want a PREEMPTED event by projects/team-b", evs)
	}

	// The audit log (written by the workload service's process, read through
	// the identity service) has the four submissions, b2's (the one that
	// caused the preemption) included, each by the administrator and OK.
	ids := identityv1.NewIdentityServiceClient(identityConn)
	eventually(t, 10*time.Second, "the submissions in the audit log", all, func() string {
		r, err := ids.ListAuditEvents(t.Context(), &identityv1.ListAuditEventsRequest{
			Filter: `method = "/runway.workload.v1.WorkloadService/CreateWorkload"`})
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, e := range r.GetAuditEvents() {
			if e.GetPrincipal() != "users/admin" || e.GetStatusCode() != 0 || e.GetPeerAddress() == "" {
				return fmt.Sprintf("event %v", e)
			}
			got = append(got, e.GetResource())
		}
		slices.Sort(got)
		want := []string{"projects/team-a/workloads/a1", "projects/team-a/workloads/a2",
			"projects/team-b/workloads/b1", "projects/team-b/workloads/b2"}
		if !slices.Equal(got, want) {
			return fmt.Sprintf("audited %v, want %v", got, want)
		}
		return ""
	})

	// Either scheduler replica answers GetQueue (from etcd, whichever leads).
	for i, s := range schedulers {
		eventually(t, 10*time.Second, fmt.Sprintf("scheduler-%d: 2 GPUs allocated to each team", i+1), all, func() string {
			for _, p := range []string{"team-a", "team-b"} {
				q, err := s.GetQueue(t.Context(), &schedulerv1.GetQueueRequest{Name: "projects/" + p + "/queue"})
				if err != nil {
					return err.Error()
				}
				var alloc int64 = -1
				for _, np := range q.GetNodePools() {
					if np.GetNodePool() == "nodepools/default" {
						alloc = np.GetAllocated().GetMilliGpus()
					}
				}
				if alloc != 2000 {
					return fmt.Sprintf("%s allocated %d milli-GPUs", p, alloc)
				}
			}
			return ""
		})
	}
}
