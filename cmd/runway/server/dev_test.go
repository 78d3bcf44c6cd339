package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/scheduler"
)

// The dev composition is stopped by each test (etcd, server, scheduler,
// agents and their pods); goleak checks that nothing is left running. No
// goroutine needs ignoring: the embedded etcd stops all of its own on Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// dev is a running `runway dev` composition and clients of its services.
type dev struct {
	identity  identityv1.IdentityServiceClient
	addr      string
	token     string // the bootstrap administrator's, from RunDev
	quota     quotav1.QuotaServiceClient
	workload  workloadv1.WorkloadServiceClient
	gov       workloadv1.GovernanceServiceClient
	scheduler schedulerv1.SchedulerServiceClient
	nodes     nodemanagerv1.NodeManagerServiceClient
}

// startDev runs server.RunDev on 127.0.0.1:0 in dir until cleanup, which
// stops it and checks that it returned nil.
func startDev(t *testing.T, dir string, nodes, gpus int, opts ...func(*server.DevConfig)) *dev {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	cfg := server.DevConfig{DataDir: dir, Listen: "127.0.0.1:0", Nodes: nodes, GPUsPerNode: gpus, Logger: quiet,
		EtcdOptions: []etcdtest.Option{etcdtest.WithTestSpeedups(), etcdtest.WithLogger(zap.NewNop())},
		Scheduler:   scheduler.Config{Interval: 100 * time.Millisecond, Debounce: 10 * time.Millisecond},
		LeaseTTL:    time.Second, StopGrace: time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	go func() { done <- server.RunDev(ctx, cfg, func(addr, token string) { ready <- [2]string{addr, token} }) }()
	var addr, token string
	select {
	case r := <-ready:
		addr, token = r[0], r[1]
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
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &dev{identity: identityv1.NewIdentityServiceClient(conn), addr: addr, token: token, quota: quotav1.NewQuotaServiceClient(conn),
		workload: workloadv1.NewWorkloadServiceClient(conn), gov: workloadv1.NewGovernanceServiceClient(conn), scheduler: schedulerv1.NewSchedulerServiceClient(conn),
		nodes: nodemanagerv1.NewNodeManagerServiceClient(conn)}
}

// eventually polls cond every 20 ms until it returns "" (met), failing
// with its last answer after 20 s.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, why)
		}
		<-tick.C
	}
}

func (d *dev) project(t *testing.T, id string, gpus int64) {
	t.Helper()
	deserved := gpus * 1000
	_, err := d.quota.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: id, Project: &quotav1.Project{
		NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
			Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}}})
	if err != nil {
		t.Fatalf("CreateProject(%s): %v", id, err)
	}
}

func (d *dev) training(t *testing.T, project, id string, gpus int32) {
	t.Helper()
	_, err := d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/" + project, WorkloadId: id, Workload: &workloadv1.Workload{
			Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "30"},
				Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: gpus}}}}})
	if err != nil {
		t.Fatalf("CreateWorkload(%s/%s): %v", project, id, err)
	}
}

// phases reports each workload's phase as the scheduler sees it (a bound
// workload is RUNNING there), e.g. "team-a/a1=RUNNING".
func (d *dev) phases(t *testing.T, names ...string) map[string]workloadv1.WorkloadPhase {
	t.Helper()
	out := map[string]workloadv1.WorkloadPhase{}
	for _, n := range names {
		project, id, _ := strings.Cut(n, "/")
		r, err := d.scheduler.ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{
			Name: "projects/" + project + "/workloads/" + id})
		if err == nil {
			out[n] = r.GetPhase()
		}
	}
	return out
}

// pool is a queue's default node pool entry.
func pool(q *schedulerv1.Queue) *schedulerv1.QueueNodePool {
	for _, p := range q.GetNodePools() {
		if p.GetNodePool() == "nodepools/default" {
			return p
		}
	}
	return nil
}

const running = workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING

// TestDevFairShareAndReclaim runs the dev composition with 2 nodes × 2
// GPUs: team-a and team-b deserve 2 GPUs each; a1 (1), a2 (2) and b1 (1)
// fill the 4 GPUs, team-a over its quota (fair share 3). b2 (1) then
// reclaims team-b's quota: a1 is evicted for it. The eviction is checked on
// both sides: the SchedulerService (phases, queues' allocations, b2's
// decision naming a1) and the WorkloadService, where the status controller
// folds it into a1's status (PENDING, a PREEMPTED event by b2).
func TestDevFairShareAndReclaim(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, dir, 2, 2)

	env, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	// The env file makes the CLI work at once: the address and the token
	// the test's own clients use (every call below carries it).
	if want := "export RUNWAY_SERVER=" + d.addr + "\nexport RUNWAY_TOKEN=" + d.token + "\n"; string(env) != want {
		t.Errorf("env file = %q, want %q", env, want)
	}

	d.project(t, "team-a", 2)
	d.project(t, "team-b", 2)
	d.training(t, "team-a", "a1", 1)
	d.training(t, "team-a", "a2", 2)
	d.training(t, "team-b", "b1", 1)

	eventually(t, "a1, a2 and b1 placed and team-a's fair share 3 GPUs", func() string {
		ph := d.phases(t, "team-a/a1", "team-a/a2", "team-b/b1")
		for _, n := range []string{"team-a/a1", "team-a/a2", "team-b/b1"} {
			if ph[n] != running {
				return fmt.Sprintf("phases %v", ph)
			}
		}
		qs, err := d.scheduler.ListQueues(t.Context(), &schedulerv1.ListQueuesRequest{})
		if err != nil {
			return err.Error()
		}
		i := slices.IndexFunc(qs.GetQueues(), func(q *schedulerv1.Queue) bool { return q.GetName() == "projects/team-a/queue" })
		if i < 0 {
			return "no team-a queue"
		}
		if fs := pool(qs.GetQueues()[i]).GetFairShare().GetMilliGpus(); fs != 3000 {
			return fmt.Sprintf("team-a fair share %d milli-GPUs", fs)
		}
		return ""
	})

	d.training(t, "team-b", "b2", 1)
	eventually(t, "b2 placed, a1 evicted, 2 GPUs allocated to each team", func() string {
		ph := d.phases(t, "team-a/a1", "team-a/a2", "team-b/b1", "team-b/b2")
		if ph["team-b/b2"] != running || ph["team-a/a1"] == running ||
			ph["team-a/a2"] != running || ph["team-b/b1"] != running {
			return fmt.Sprintf("phases %v", ph)
		}
		for _, p := range []string{"team-a", "team-b"} {
			q, err := d.scheduler.GetQueue(t.Context(), &schedulerv1.GetQueueRequest{Name: "projects/" + p + "/queue"})
			if err != nil {
				return err.Error()
			}
			if a := pool(q).GetAllocated().GetMilliGpus(); a != 2000 {
				return fmt.Sprintf("%s allocated %d milli-GPUs", p, a)
			}
		}
		return ""
	})
	if ph := d.phases(t, "team-a/a1")["team-a/a1"]; ph != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING {
		t.Errorf("a1 phase %v, want PENDING", ph)
	}
	ex, err := d.scheduler.ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{Name: "projects/team-b/workloads/b2"})
	if err != nil {
		t.Fatal(err)
	}
	// The status controller folded the eviction into a1's status.
	var a1 *workloadv1.Workload
	eventually(t, "a1 PENDING with a PREEMPTED event in WorkloadService", func() string {
		var err error
		a1, err = d.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/a1"})
		if err != nil {
			return err.Error()
		}
		if a1.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING ||
			a1.GetStatus().GetPreemptionCount() == 0 {
			return fmt.Sprintf("status %v", a1.GetStatus())
		}
		return ""
	})
	evs := a1.GetStatus().GetEvents()
	i := slices.IndexFunc(evs, func(e *workloadv1.WorkloadEvent) bool {
		return e.GetType() == workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED
	})
	if i < 0 || evs[i].GetBy() != "projects/team-b" {
		t.Errorf("a1's events %v, want a PREEMPTED event by projects/team-b", evs)
	}
	// The scheduler's reasons for a1 reach its status, with the numbers.
	eventually(t, "a1's pending reasons name team-a's fair share", func() string {
		w, err := d.workload.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/a1"})
		if err != nil {
			return err.Error()
		}
		for _, r := range w.GetStatus().GetPendingReasons() {
			if m := r.GetMessage(); strings.Contains(m, "team-a") && strings.Contains(m, "fair share") {
				return ""
			}
		}
		return fmt.Sprintf("pending reasons %v", w.GetStatus().GetPendingReasons())
	})

	// b2's placement names its victim: a1, reclaimed for team-b's quota.
	dec := ex.GetLastDecision()
	if dec.GetOutcome() != schedulerv1.DecisionOutcome_DECISION_OUTCOME_PLACED ||
		dec.GetRule() != workloadv1.SchedulingRule_SCHEDULING_RULE_RECLAIM ||
		!slices.Equal(dec.GetWorkloads(), []string{"projects/team-a/workloads/a1"}) {
		t.Errorf("b2's last decision = %v, want PLACED by RECLAIM evicting projects/team-a/workloads/a1", dec)
	}

	// A user with no role in team-a is refused a submission there.
	if _, err := d.identity.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "intruder",
		User: &identityv1.User{Email: "intruder@example.com", Password: "intruder's first password"}}); err != nil {
		t.Fatal(err)
	}
	login, err := d.identity.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
		Password: &identityv1.PasswordCredentials{User: "intruder", Password: "intruder's first password",
			NewPassword: "intruder's second password"}}})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+d.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(auth.Bearer(login.GetAccessToken())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = workloadv1.NewWorkloadServiceClient(conn).CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "x1", Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "busybox"}}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("CreateWorkload by a user without a role: %v, want PermissionDenied", err)
	}
	// The audit log has the quick start's submissions (b2's, which caused
	// the preemption, among them) by the administrator, and the refusal.
	eventually(t, "the submissions and the refusal in the audit log", func() string {
		r, err := d.identity.ListAuditEvents(t.Context(), &identityv1.ListAuditEventsRequest{
			Filter: `method = "/runway.workload.v1.WorkloadService/CreateWorkload"`})
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, e := range r.GetAuditEvents() {
			got = append(got, fmt.Sprintf("%s %s %d", e.GetPrincipal(), e.GetResource(), e.GetStatusCode()))
		}
		want := []string{"users/intruder projects/team-a/workloads/x1 7", "users/admin projects/team-b/workloads/b2 0",
			"users/admin projects/team-b/workloads/b1 0", "users/admin projects/team-a/workloads/a2 0",
			"users/admin projects/team-a/workloads/a1 0"}
		if !slices.Equal(got, want) {
			return fmt.Sprintf("audited (newest first) %v, want %v", got, want)
		}
		return ""
	})
}

// TestDevRestartResumes stops the composition and starts it again on the
// same data directory: what was stored (a project) is still there.
func TestDevRestartResumes(t *testing.T) {
	dir := t.TempDir()
	t.Run("first", func(t *testing.T) {
		d := startDev(t, dir, 1, 1)
		d.project(t, "team-a", 1)
	})
	t.Run("again", func(t *testing.T) {
		d := startDev(t, dir, 1, 1)
		p, err := d.quota.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/team-a"})
		if err != nil {
			t.Fatalf("GetProject after restart: %v", err)
		}
		if got := p.GetNodePoolQuotas()[0].GetGpu().GetDeservedMilliGpus(); got != 1000 {
			t.Errorf("team-a deserves %d milli-GPUs after restart, want 1000", got)
		}
	})
}
