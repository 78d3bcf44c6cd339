package workload_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/egress"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/sealing"
	"github.com/runwayhq/runway/services/workload"
)

// notifyEnv is the workload service with its NotificationService over an
// embedded etcd and a real guard: users, access rules, projects, nodes and
// workloads are written to etcd as their own services would. Calls name
// their caller in the x-test-user metadata (the test's interceptor stands
// where pkg/auth's token check does).
type notifyEnv struct {
	etcd  *etcdtest.Cluster
	svc   *workload.Server
	guard *auth.Guard
	conn  *grpc.ClientConn
}

func put(t *testing.T, e *notifyEnv, key string, m proto.Message) {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.etcd.Client.Put(context.Background(), key, string(b)); err != nil {
		t.Fatal(err)
	}
}

// user writes a user holding role on scope.
func (e *notifyEnv) user(t *testing.T, id, role string, scope *identityv1.Scope) {
	t.Helper()
	put(t, e, etcdstore.PrefixUsers+id, &identityv1.StoredUser{User: &identityv1.User{Name: "users/" + id, Uid: "uid-" + id}})
	put(t, e, etcdstore.PrefixAccessRules+"r-"+id, &identityv1.AccessRule{Name: "accessRules/r-" + id,
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/" + id}, Role: role, Scope: scope})
	if err := e.guard.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func startNotify(t *testing.T, cfg workload.NotificationConfig) *notifyEnv {
	t.Helper()
	e := &notifyEnv{etcd: etcdtest.New(t)}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	if e.guard, err = auth.New(ctx, auth.Config{}, auth.Deps{Client: e.etcd.Client, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	guardDone := make(chan struct{})
	go func() { _ = e.guard.Run(ctx); close(guardDone) }()
	projects := etcdstore.NewCollection(e.etcd.Client, etcdstore.PrefixProjects, func() *quotav1.Project { return new(quotav1.Project) })
	keyFile := filepath.Join(t.TempDir(), "credentials.keys")
	if _, err := sealing.Create(keyFile); err != nil {
		t.Fatal(err)
	}
	ring, err := sealing.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	e.svc, err = workload.New(workload.Config{Notifications: cfg}, workload.Deps{Client: e.etcd.Client, Logger: quiet,
		Projects: etcdProjects{workload.NewStoredProjects(e.etcd.Client, nil), projects}, Guard: e.guard, CredentialKeys: ring})
	if err != nil {
		t.Fatal(err)
	}
	asCaller := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if u := md.Get("x-test-user"); len(u) == 1 {
			if c, ok := e.guard.CallerOf(u[0]); ok {
				ctx = auth.WithCaller(ctx, c)
			}
		}
		return h(ctx, req)
	}
	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0", Logger: quiet, ShutdownTimeout: 2 * time.Second, Auth: asCaller})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(e.svc.Register)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	if e.conn, err = grpc.NewClient("passthrough:///"+srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.conn.Close()
		cancel()
		<-served
		<-guardDone
	})
	for _, p := range []struct{ id, dept string }{{"team-a", "dept-a"}, {"team-b", "dept-b"}} {
		put(t, e, etcdstore.PrefixProjects+p.id, &quotav1.Project{Name: "projects/" + p.id, Uid: "uid-" + p.id, Department: "departments/" + p.dept,
			NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: proto.Int64(1000)}}}})
		put(t, e, etcdstore.PrefixDepartments+p.dept, &quotav1.Department{Name: "departments/" + p.dept, Uid: "uid-" + p.dept,
			NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: proto.Int64(1000)}}}})
	}
	return e
}

// runDispatcher runs a dispatcher until the returned stop is called.
func (e *notifyEnv) runDispatcher(t *testing.T) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	d := e.svc.Dispatcher()
	go func() { _ = d.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func (e *notifyEnv) client(user string) (workloadv1.NotificationServiceClient, context.Context) {
	return workloadv1.NewNotificationServiceClient(e.conn), metadata.AppendToOutgoingContext(context.Background(), "x-test-user", user)
}

// receiver counts the notifications it got, by event and resource.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string]int
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{got: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var n struct{ Event, Resource string }
		if err := json.NewDecoder(req.Body).Decode(&n); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		r.mu.Lock()
		r.got[n.Event+" "+n.Resource]++
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[key]
}

func (r *receiver) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.got {
		n += c
	}
	return n
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var fastNotify = workload.NotificationConfig{Egress: egress.Policy{AllowLoopback: true}, Tick: 30 * time.Millisecond,
	Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}

func (e *notifyEnv) subscribe(t *testing.T, user string, sub *workloadv1.Subscription) *workloadv1.Subscription {
	t.Helper()
	c, ctx := e.client(user)
	s, err := c.CreateSubscription(ctx, &workloadv1.CreateSubscriptionRequest{Parent: "users/-", Subscription: sub})
	if err != nil {
		t.Fatalf("CreateSubscription(%s): %v", user, err)
	}
	return s
}

func (e *notifyEnv) failed(t *testing.T, project, id string) {
	now := timestamppb.Now()
	put(t, e, etcdstore.PrefixWorkloads+project+"/"+id, &workloadv1.Workload{Name: "projects/" + project + "/workloads/" + id, Uid: "uid-" + id,
		Project: "projects/" + project, CreateTime: now, UpdateTime: now, Creator: "users/root",
		Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED, EndTime: now}})
}

// TestDispatcher_restart: a failure delivered before the dispatcher stops
// is not sent again by the next one, and a failure while none ran is sent
// by the next one (within the lookback): nothing lost, nothing doubled.
func TestDispatcher_restart(t *testing.T) {
	e := startNotify(t, fastNotify)
	e.user(t, "alice", "roles/l1-researcher", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})
	r := newReceiver(t)
	e.subscribe(t, "users/alice", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_FAILED},
		Channel: &workloadv1.Subscription_Webhook{Webhook: &workloadv1.WebhookChannel{Url: r.srv.URL}}})
	stop := e.runDispatcher(t)
	e.failed(t, "team-a", "w1")
	waitFor(t, "w1 delivered", func() bool { return r.count("NOTIFICATION_EVENT_WORKLOAD_FAILED projects/team-a/workloads/w1") == 1 })
	stop()
	e.failed(t, "team-a", "w2")
	e.runDispatcher(t)
	waitFor(t, "w2 delivered", func() bool { return r.count("NOTIFICATION_EVENT_WORKLOAD_FAILED projects/team-a/workloads/w2") == 1 })
	time.Sleep(300 * time.Millisecond) // ten ticks
	if n := r.count("NOTIFICATION_EVENT_WORKLOAD_FAILED projects/team-a/workloads/w1"); n != 1 {
		t.Errorf("w1 delivered %d times, want 1", n)
	}
	if r.total() != 2 {
		t.Errorf("deliveries %v", r.got)
	}
}

// TestDispatcher_conditions: the cluster's events reach the administrator
// (a GPU turning unhealthy, a node lost, a project and a department over
// quota past the threshold) and the lasting ones (pending and idle past
// their thresholds) are each notified once, not at every tick; alice,
// subscribed to team-a's pending workloads, gets team-a's and not team-b's.
func TestDispatcher_conditions(t *testing.T) {
	e := startNotify(t, fastNotify)
	e.user(t, "root", "roles/system-admin", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT})
	e.user(t, "alice", "roles/l1-researcher", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})
	admin, alice := newReceiver(t), newReceiver(t)
	hook := func(r *receiver) *workloadv1.Subscription_Webhook {
		return &workloadv1.Subscription_Webhook{Webhook: &workloadv1.WebhookChannel{Url: r.srv.URL}}
	}
	e.subscribe(t, "users/root", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{
		workloadv1.NotificationEvent_NOTIFICATION_EVENT_NODE_LOST, workloadv1.NotificationEvent_NOTIFICATION_EVENT_GPU_UNHEALTHY,
		workloadv1.NotificationEvent_NOTIFICATION_EVENT_PROJECT_OVER_QUOTA, workloadv1.NotificationEvent_NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA,
		workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_IDLE_GPUS},
		IdleThreshold: durationpb.New(time.Hour), OverQuotaThresholdPercent: 50, Channel: hook(admin)})
	e.subscribe(t, "users/alice", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_PENDING_TOO_LONG},
		PendingThreshold: durationpb.New(time.Hour), Channel: hook(alice)})
	e.runDispatcher(t)

	node := &nodemanagerv1.Node{Name: "nodes/n1", Uid: "uid-n1", UpdateTime: timestamppb.Now(),
		Devices: []*nodemanagerv1.GpuDevice{{Index: 0, Uuid: "GPU-0", Healthy: true}, {Index: 1, Uuid: "GPU-1", Healthy: true}}}
	put(t, e, etcdstore.PrefixNodes+"n1", node)
	time.Sleep(100 * time.Millisecond)
	node.Devices[1].Healthy, node.Devices[1].HealthMessage, node.UpdateTime = false, "XID 79", timestamppb.Now()
	put(t, e, etcdstore.PrefixNodes+"n1", node)
	waitFor(t, "GPU unhealthy", func() bool { return admin.count("NOTIFICATION_EVENT_GPU_UNHEALTHY nodes/n1") == 1 })
	if _, err := e.etcd.Client.Delete(t.Context(), etcdstore.PrefixNodes+"n1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node lost", func() bool { return admin.count("NOTIFICATION_EVENT_NODE_LOST nodes/n1") == 1 })

	old := timestamppb.New(time.Now().Add(-2 * time.Hour))
	for _, w := range []*workloadv1.Workload{
		// team-a: 2 GPUs allocated, over its 1; dept-a 100% over its 1.
		{Name: "projects/team-a/workloads/busy", Uid: "uid-busy", Project: "projects/team-a", CreateTime: old, Status: &workloadv1.WorkloadStatus{
			Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING, AllocatedMilliGpus: 2000, StartTime: old, GpuIdleTime: durationpb.New(90 * time.Minute)}},
		// team-b: 1.2 GPUs of 1, dept-b 20% over: under the threshold.
		{Name: "projects/team-b/workloads/some", Uid: "uid-some", Project: "projects/team-b", CreateTime: old, Status: &workloadv1.WorkloadStatus{
			Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING, AllocatedMilliGpus: 1200, StartTime: old}},
		{Name: "projects/team-a/workloads/waits", Uid: "uid-waits", Project: "projects/team-a", CreateTime: old,
			Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING}},
		{Name: "projects/team-b/workloads/waits-b", Uid: "uid-waits-b", Project: "projects/team-b", CreateTime: old,
			Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING}},
		{Name: "projects/team-a/workloads/fresh", Uid: "uid-fresh", Project: "projects/team-a", CreateTime: timestamppb.Now(),
			Status: &workloadv1.WorkloadStatus{Phase: workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING}},
	} {
		project, id, _ := workload.ParseWorkloadName(w.GetName())
		put(t, e, etcdstore.PrefixWorkloads+project+"/"+id, w)
	}
	waitFor(t, "over quota, idle and pending", func() bool {
		return admin.count("NOTIFICATION_EVENT_PROJECT_OVER_QUOTA projects/team-a") == 1 &&
			admin.count("NOTIFICATION_EVENT_PROJECT_OVER_QUOTA projects/team-b") == 1 &&
			admin.count("NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA departments/dept-a") == 1 &&
			admin.count("NOTIFICATION_EVENT_WORKLOAD_IDLE_GPUS projects/team-a/workloads/busy") == 1 &&
			alice.count("NOTIFICATION_EVENT_WORKLOAD_PENDING_TOO_LONG projects/team-a/workloads/waits") == 1
	})
	time.Sleep(300 * time.Millisecond) // ten ticks: lasting conditions are not sent again
	if admin.total() != 6 {
		t.Errorf("the administrator got %v, want 6 notifications", admin.got)
	}
	if alice.total() != 1 {
		t.Errorf("alice got %v, want only team-a's waits (not team-b's, not the fresh one)", alice.got)
	}
}

// TestDispatcher_rate: a user is sent at most RatePerMinute notifications a
// minute; the next waits, PENDING, saying why, and is not lost.
func TestDispatcher_rate(t *testing.T) {
	cfg := fastNotify
	cfg.RatePerMinute = 1
	e := startNotify(t, cfg)
	e.user(t, "alice", "roles/l1-researcher", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})
	r := newReceiver(t)
	sub := e.subscribe(t, "users/alice", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_FAILED},
		Channel: &workloadv1.Subscription_Webhook{Webhook: &workloadv1.WebhookChannel{Url: r.srv.URL}}})
	e.runDispatcher(t)
	e.failed(t, "team-a", "w1")
	e.failed(t, "team-a", "w2")
	c, ctx := e.client("users/alice")
	var ds []*workloadv1.Delivery
	waitFor(t, "one sent, one waiting", func() bool {
		l, err := c.ListDeliveries(ctx, &workloadv1.ListDeliveriesRequest{Parent: sub.GetName()})
		if err != nil {
			return false
		}
		ds = l.GetDeliveries()
		states := map[workloadv1.DeliveryState]int{}
		for _, d := range ds {
			states[d.GetState()]++
		}
		return len(ds) == 2 && states[workloadv1.DeliveryState_DELIVERY_STATE_SENT] == 1 && states[workloadv1.DeliveryState_DELIVERY_STATE_PENDING] == 1
	})
	for _, d := range ds {
		if d.GetState() == workloadv1.DeliveryState_DELIVERY_STATE_PENDING &&
			(d.GetAttempts() != 0 || d.GetLastError() != "waiting: users/alice is sent at most 1 notifications a minute") {
			t.Errorf("the waiting delivery: %v", d)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if r.total() != 1 {
		t.Errorf("the receiver got %v, want 1 within the minute", r.got)
	}
}
