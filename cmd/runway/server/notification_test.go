package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/egress"
	"github.com/runwayhq/runway/services/workload"
)

// hook is a webhook receiver on 127.0.0.1: it answers each POST with the
// next of codes (200 when they run out) and keeps the bodies it accepted.
type hook struct {
	srv   *httptest.Server
	mu    sync.Mutex
	codes []int
	tries int
	got   []map[string]any
}

func newHook(t *testing.T, codes ...int) *hook {
	h := &hook{codes: codes}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.tries++
		code := http.StatusOK
		if len(h.codes) > 0 {
			code, h.codes = h.codes[0], h.codes[1:]
		}
		if code == http.StatusOK {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Errorf("webhook body %q: %v", body, err)
			}
			h.got = append(h.got, m)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// bodies are the accepted bodies, as JSON text.
func (h *hook) bodies() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, m := range h.got {
		b, _ := json.Marshal(m)
		out = append(out, string(b))
	}
	return out
}

// mailbox is an SMTP server on 127.0.0.1 (go-smtp) keeping each message.
type mailbox struct {
	addr string
	mu   sync.Mutex
	msgs []string
}

type mailSession struct {
	box      *mailbox
	from, to string
}

func (s *mailSession) Reset()                                   {}
func (s *mailSession) Logout() error                            { return nil }
func (s *mailSession) Mail(f string, _ *smtp.MailOptions) error { s.from = f; return nil }
func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = to
	return nil
}
func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, "MAIL FROM "+s.from+" RCPT TO "+s.to+"\n"+string(b))
	s.box.mu.Unlock()
	return nil
}

func newMailbox(t *testing.T) *mailbox {
	box := &mailbox{}
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &mailSession{box: box}, nil }))
	srv.Domain = "localhost"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	box.addr = l.Addr().String()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return box
}

func (b *mailbox) messages() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.msgs...)
}

// notifyConfig: fast ticks and retries, so the test waits little.
func notifyConfig(p egress.Policy) *workload.NotificationConfig {
	return &workload.NotificationConfig{Egress: p, Tick: 50 * time.Millisecond, Backoff: 100 * time.Millisecond,
		MaxBackoff: 400 * time.Millisecond, MaxAttempts: 3}
}

func submitAs(t *testing.T, conn *grpc.ClientConn, project, id string, gpus int32, cmd ...string) {
	t.Helper()
	spec := &workloadv1.WorkloadSpec{Image: "busybox", Command: cmd}
	if gpus > 0 {
		spec.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: gpus}}
	}
	_, err := workloadv1.NewWorkloadServiceClient(conn).CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/" + project, WorkloadId: id,
		Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: spec}})
	if err != nil {
		t.Fatalf("CreateWorkload(%s/%s): %v", project, id, err)
	}
}

func (tn *tenancy) waitPhase(t *testing.T, name string, want workloadv1.WorkloadPhase) {
	t.Helper()
	eventually(t, name+" "+want.String(), func() string {
		w, err := workloadv1.NewWorkloadServiceClient(tn.admin).GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: name})
		if err != nil {
			return err.Error()
		}
		if w.GetStatus().GetPhase() != want {
			return w.GetStatus().GetPhase().String()
		}
		return ""
	})
}

func setDeserved(t *testing.T, tn *tenancy, project string, gpus int64) {
	t.Helper()
	milli := gpus * 1000
	_, err := quotav1.NewQuotaServiceClient(tn.admin).UpdateProject(t.Context(), &quotav1.UpdateProjectRequest{
		Project: &quotav1.Project{Name: "projects/" + project, NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
			Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &milli}}}}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"node_pool_quotas"}}})
	if err != nil {
		t.Fatalf("UpdateProject(%s): %v", project, err)
	}
}

var (
	evFailed    = workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_FAILED
	evPreempted = workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_PREEMPTED
)

func subscribe(t *testing.T, c workloadv1.NotificationServiceClient, id string, sub *workloadv1.Subscription) *workloadv1.Subscription {
	t.Helper()
	s, err := c.CreateSubscription(t.Context(), &workloadv1.CreateSubscriptionRequest{Parent: "users/-", SubscriptionId: id, Subscription: sub})
	if err != nil {
		t.Fatalf("CreateSubscription(%s): %v", id, err)
	}
	return s
}

func webhook(url string, slack bool) *workloadv1.Subscription_Webhook {
	return &workloadv1.Subscription_Webhook{Webhook: &workloadv1.WebhookChannel{Url: url, Slack: slack}}
}

// deliveries waits until sub's deliveries satisfy ok, and returns them.
func deliveries(t *testing.T, c workloadv1.NotificationServiceClient, sub, what string, ok func([]*workloadv1.Delivery) string) []*workloadv1.Delivery {
	t.Helper()
	var out []*workloadv1.Delivery
	eventually(t, what, func() string {
		r, err := c.ListDeliveries(t.Context(), &workloadv1.ListDeliveriesRequest{Parent: sub})
		if err != nil {
			return err.Error()
		}
		out = r.GetDeliveries()
		return ok(out)
	})
	return out
}

// TestNotifications is one dev server with a node of 2 GPUs: alice
// (L1 researcher on team-a and team-a2) subscribes with a webhook, a
// Slack-style webhook and email (a go-smtp server started here). Her
// workload that fails and her workload that is preempted (team-b reclaims
// its quota) reach all three; another project's failure reaches none; a
// failure in team-a2 after her rule there is removed reaches none, and a
// delivery recorded while she could view it is withheld once she no
// longer may. A receiver answering 500 then 200 is retried and the failure
// recorded; one that always fails ends FAILED with its answer.
func TestNotifications(t *testing.T) {
	tn := startTenancyWith(t, func(c *server.DevConfig) {
		c.Nodes, c.GPUsPerNode = 1, 2
		c.Notifications = notifyConfig(egress.Policy{AllowLoopback: true})
	})
	alice := tn.member(t, "alice", "roles/l1-researcher", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})
	ids := identityv1.NewIdentityServiceClient(tn.admin)
	a2rule, err := ids.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/alice"},
		Role:    "roles/l1-researcher", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a2"}}})
	if err != nil {
		t.Fatal(err)
	}
	eventuallyOK(t, "alice's second rule applies", func() error {
		c, err := identityv1.NewIdentityServiceClient(tn.conn(t, alice)).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
		if err == nil && len(c.GetAccessRules()) != 2 {
			err = fmt.Errorf("rules %v", c.GetAccessRules())
		}
		return err
	})
	admin := workloadv1.NewNotificationServiceClient(tn.admin)
	an := workloadv1.NewNotificationServiceClient(tn.conn(t, alice))

	plain, slack, flaky, down := newHook(t), newHook(t), newHook(t, 500), newHook(t, 500, 500, 500, 500)
	box := newMailbox(t)
	// A port where nothing listens yet: the first attempts fail.
	late, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lateAddr := late.Addr().String()
	late.Close()

	both := []workloadv1.NotificationEvent{evFailed, evPreempted}
	sPlain := subscribe(t, an, "plain", &workloadv1.Subscription{Events: both, Channel: webhook(plain.srv.URL+"/hook", false)})
	sSlack := subscribe(t, an, "slack", &workloadv1.Subscription{Events: both, Project: "projects/team-a", Channel: webhook(slack.srv.URL, true)})
	sMail := subscribe(t, an, "mail", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{evFailed}, Project: "projects/team-a",
		Channel: &workloadv1.Subscription_Email{Email: &workloadv1.EmailChannel{To: "alice@example.com", From: "runway@example.com",
			SmtpServer: box.addr, Tls: workloadv1.SmtpTls_SMTP_TLS_NONE}}})
	sFlaky := subscribe(t, an, "flaky", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{evFailed}, Project: "projects/team-a", Channel: webhook(flaky.srv.URL, false)})
	sDown := subscribe(t, an, "down", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{evFailed}, Project: "projects/team-a", Channel: webhook(down.srv.URL, false)})
	sLate := subscribe(t, an, "late", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{evFailed}, Project: "projects/team-a2", Channel: webhook("http://"+lateAddr+"/", false)})

	// Failures: alice's own in team-a, the administrator's in team-b.
	submitAs(t, tn.conn(t, alice), "team-a", "crash", 0, "sh", "-c", "exit 3")
	submitAs(t, tn.admin, "team-b", "crash-b", 0, "sh", "-c", "exit 4")
	tn.waitPhase(t, "projects/team-a/workloads/crash", workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED)
	tn.waitPhase(t, "projects/team-b/workloads/crash-b", workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED)

	// Preemption: team-a's 2-GPU training holds the node over team-a's
	// quota; team-b reclaims its 1.
	setDeserved(t, tn, "team-a", 1)
	setDeserved(t, tn, "team-b", 1)
	submitAs(t, tn.conn(t, alice), "team-a", "hog", 2, "sleep", "300")
	tn.waitPhase(t, "projects/team-a/workloads/hog", workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING)
	submitAs(t, tn.admin, "team-b", "claim", 1, "sleep", "300")
	eventually(t, "hog preempted", func() string {
		w, err := workloadv1.NewWorkloadServiceClient(tn.admin).GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/hog"})
		if err != nil || w.GetStatus().GetPreemptionCount() == 0 {
			return fmt.Sprint(w.GetStatus().GetPhase(), err)
		}
		return ""
	})

	wantPlain := func(b []string) string {
		var failed, preempted bool
		for _, s := range b {
			failed = failed || strings.Contains(s, `"NOTIFICATION_EVENT_WORKLOAD_FAILED"`) && strings.Contains(s, `"projects/team-a/workloads/crash"`)
			preempted = preempted || strings.Contains(s, `"NOTIFICATION_EVENT_WORKLOAD_PREEMPTED"`) && strings.Contains(s, `"projects/team-a/workloads/hog"`)
		}
		if !failed || !preempted {
			return fmt.Sprintf("bodies %v", b)
		}
		return ""
	}
	eventually(t, "the webhook gets crash failed and hog preempted", func() string {
		if why := wantPlain(plain.bodies()); why != "" {
			r, err := an.ListDeliveries(t.Context(), &workloadv1.ListDeliveriesRequest{Parent: sPlain.GetName()})
			return fmt.Sprint(why, r, err)
		}
		return ""
	})
	eventually(t, "the Slack webhook gets both as text", func() string {
		b := slack.bodies()
		var failed, preempted bool
		for _, s := range b {
			failed = failed || strings.HasPrefix(s, `{"text":"[Runway] failed: Workload projects/team-a/workloads/crash failed`)
			preempted = preempted || strings.HasPrefix(s, `{"text":"[Runway] preempted: Workload projects/team-a/workloads/hog was preempted`)
		}
		if !failed || !preempted {
			return fmt.Sprintf("bodies %v", b)
		}
		return ""
	})
	eventually(t, "an email for crash", func() string {
		for _, m := range box.messages() {
			if strings.Contains(m, "RCPT TO alice@example.com") && strings.Contains(m, "Subject: [Runway] failed: Workload projects/team-a/workloads/crash failed") {
				return ""
			}
		}
		return fmt.Sprintf("messages %q", box.messages())
	})

	// 500 then 200: sent on the second attempt, the failure recorded.
	d := deliveries(t, an, sFlaky.GetName(), "flaky delivery sent", func(ds []*workloadv1.Delivery) string {
		if len(ds) != 1 || ds[0].GetState() != workloadv1.DeliveryState_DELIVERY_STATE_SENT {
			return fmt.Sprint(ds)
		}
		return ""
	})
	if d[0].GetAttempts() != 2 || !strings.Contains(d[0].GetLastError(), "500") || d[0].GetSentTime() == nil {
		t.Errorf("flaky delivery: %v", d[0])
	}
	// Always 500: FAILED after 3 attempts, the answer recorded.
	d = deliveries(t, an, sDown.GetName(), "down delivery failed", func(ds []*workloadv1.Delivery) string {
		if len(ds) != 1 || ds[0].GetState() != workloadv1.DeliveryState_DELIVERY_STATE_FAILED {
			return fmt.Sprint(ds)
		}
		return ""
	})
	if d[0].GetAttempts() != 3 || !strings.Contains(d[0].GetLastError(), "500 Internal Server Error") {
		t.Errorf("down delivery: %v", d[0])
	}

	// team-a2: a failure while alice may view it is recorded but cannot
	// be sent (nothing listens); her rule there is removed; then the
	// receiver starts. It gets nothing, and the delivery is withheld.
	submitAs(t, tn.admin, "team-a2", "crash-a2", 0, "sh", "-c", "exit 5")
	deliveries(t, an, sLate.GetName(), "a2 delivery attempted", func(ds []*workloadv1.Delivery) string {
		if len(ds) != 1 || ds[0].GetAttempts() == 0 || ds[0].GetState() != workloadv1.DeliveryState_DELIVERY_STATE_PENDING {
			return fmt.Sprint(ds)
		}
		return ""
	})
	if _, err := ids.DeleteAccessRule(t.Context(), &identityv1.DeleteAccessRuleRequest{Name: a2rule.GetName()}); err != nil {
		t.Fatal(err)
	}
	// The server has seen the removal (one guard serves every service).
	eventuallyOK(t, "alice's team-a2 rule gone", func() error {
		c, err := identityv1.NewIdentityServiceClient(tn.conn(t, alice)).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
		if err == nil && len(c.GetAccessRules()) != 1 {
			err = fmt.Errorf("rules %v", c.GetAccessRules())
		}
		return err
	})
	lateHook := &hook{}
	lateHook.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lateHook.mu.Lock()
		lateHook.tries++
		lateHook.mu.Unlock()
	}))
	if l, err := net.Listen("tcp", lateAddr); err == nil {
		lateHook.srv.Listener = l
		lateHook.srv.Start()
		t.Cleanup(lateHook.srv.Close)
	} else {
		t.Fatalf("listen again on %s: %v", lateAddr, err)
	}
	d = deliveries(t, an, sLate.GetName(), "a2 delivery withheld", func(ds []*workloadv1.Delivery) string {
		if len(ds) != 1 || ds[0].GetState() != workloadv1.DeliveryState_DELIVERY_STATE_FAILED {
			return fmt.Sprint(ds)
		}
		return ""
	})
	if !strings.Contains(d[0].GetLastError(), "withheld") || d[0].GetNotification().GetResource() != "" || d[0].GetNotification().GetMessage() != "" {
		t.Errorf("withheld delivery still tells: %v", d[0])
	}
	// A failure in team-a2 after the rule is gone is not even recorded.
	submitAs(t, tn.admin, "team-a2", "crash-a2-after", 0, "sh", "-c", "exit 6")
	tn.waitPhase(t, "projects/team-a2/workloads/crash-a2-after", workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED)
	time.Sleep(500 * time.Millisecond) // ten dispatcher ticks

	lateHook.mu.Lock()
	if lateHook.tries != 0 {
		t.Errorf("the team-a2 receiver got %d requests after alice lost team-a2", lateHook.tries)
	}
	lateHook.mu.Unlock()
	// Nothing of team-b, nor of team-a2 once alice lost it, reached any
	// receiver (the plain subscription, on every project alice views, got
	// crash-a2 while she could view it).
	for name, h := range map[string]*hook{"plain": plain, "slack": slack} {
		for _, b := range h.bodies() {
			if strings.Contains(b, "projects/team-b") || strings.Contains(b, "crash-a2-after") || strings.Contains(b, "/claim") {
				t.Errorf("%s webhook got what alice may not view: %s", name, b)
			}
		}
	}
	for _, m := range box.messages() {
		if strings.Contains(m, "projects/team-b") || strings.Contains(m, "team-a2") {
			t.Errorf("email of what alice may not view: %s", m)
		}
	}
	if n := len(box.messages()); n != 1 {
		t.Errorf("%d emails, want 1 (crash): %q", n, box.messages())
	}
	if d := deliveries(t, an, sLate.GetName(), "one a2 delivery", func(ds []*workloadv1.Delivery) string {
		if len(ds) != 1 {
			return fmt.Sprint(ds)
		}
		return ""
	}); d[0].GetNotification().GetDeliveryId() == "" {
		t.Errorf("delivery id missing: %v", d[0])
	}

	// Subscriptions are their owner's alone.
	if _, err := admin.GetSubscription(t.Context(), &workloadv1.GetSubscriptionRequest{Name: sPlain.GetName()}); status.Code(err) != codes.NotFound {
		t.Errorf("the administrator's GetSubscription of alice's: %v, want NotFound", err)
	}
	if _, err := admin.ListSubscriptions(t.Context(), &workloadv1.ListSubscriptionsRequest{Parent: "users/alice"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the administrator's ListSubscriptions of alice: %v, want PermissionDenied", err)
	}
	if _, err := admin.DeleteSubscription(t.Context(), &workloadv1.DeleteSubscriptionRequest{Name: sMail.GetName()}); status.Code(err) != codes.NotFound {
		t.Errorf("the administrator's DeleteSubscription of alice's: %v, want NotFound", err)
	}
	if _, err := admin.ListDeliveries(t.Context(), &workloadv1.ListDeliveriesRequest{Parent: sSlack.GetName()}); status.Code(err) != codes.NotFound {
		t.Errorf("the administrator's ListDeliveries of alice's: %v, want NotFound", err)
	}
	l, err := an.ListSubscriptions(t.Context(), &workloadv1.ListSubscriptionsRequest{Parent: "users/-"})
	if err != nil || len(l.GetSubscriptions()) != 6 {
		t.Errorf("alice's subscriptions: %v, %v", l, err)
	}
	// The same over REST, and her deliveries.
	for path, want := range map[string]string{"/v1/users/-/subscriptions": `"users/alice/subscriptions/plain"`,
		"/v1/" + sFlaky.GetName() + "/deliveries": `"DELIVERY_STATE_SENT"`} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+tn.addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+alice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
		}
	}
}

// TestNotifications_refused: a server that allows no loopback or private
// address refuses a webhook to 127.0.0.1, to a name resolving to a private
// address and to localhost, and an SMTP server on loopback; a researcher
// may not subscribe to the cluster's events, to a project she does not
// view, or past the cap; the administrator may.
func TestNotifications_refused(t *testing.T) {
	names := map[string][]string{"hooks.internal.example": {"10.20.30.40"}, "localhost": {"127.0.0.1"}, "hooks.example": {"93.184.216.34"}}
	tn := startTenancyWith(t, func(c *server.DevConfig) {
		cfg := notifyConfig(egress.Policy{Lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			var out []netip.Addr
			for _, a := range names[host] {
				out = append(out, netip.MustParseAddr(a))
			}
			if len(out) == 0 {
				return nil, fmt.Errorf("no such host %s", host)
			}
			return out, nil
		}})
		cfg.MaxSubscriptionsPerUser = 2
		c.Notifications = cfg
	})
	bob := tn.member(t, "bob", "roles/l1-researcher", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"})
	bn := workloadv1.NewNotificationServiceClient(tn.conn(t, bob))
	receiver := newHook(t)
	failed := []workloadv1.NotificationEvent{evFailed}
	create := func(c workloadv1.NotificationServiceClient, sub *workloadv1.Subscription) error {
		_, err := c.CreateSubscription(t.Context(), &workloadv1.CreateSubscriptionRequest{Parent: "users/-", Subscription: sub})
		return err
	}
	for _, tc := range []struct {
		name, url, wantField string
	}{
		{"a webhook on 127.0.0.1", receiver.srv.URL, "subscription.webhook.url"},
		{"a name resolving to a private address", "https://hooks.internal.example/x", "subscription.webhook.url"},
		{"localhost", "http://localhost:8080/", "subscription.webhook.url"},
		{"the metadata endpoint", "http://169.254.169.254/latest", "subscription.webhook.url"},
		{"not http", "file:///etc/passwd", "subscription.webhook.url"},
	} {
		err := create(bn, &workloadv1.Subscription{Events: failed, Channel: webhook(tc.url, false)})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.wantField) {
			t.Errorf("%s: %v, want InvalidArgument on %s", tc.name, err, tc.wantField)
		}
	}
	err := create(bn, &workloadv1.Subscription{Events: failed, Channel: &workloadv1.Subscription_Email{Email: &workloadv1.EmailChannel{
		To: "bob@example.com", From: "runway@example.com", SmtpServer: "127.0.0.1:25", Tls: workloadv1.SmtpTls_SMTP_TLS_NONE}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "subscription.email.smtp_server") {
		t.Errorf("SMTP on loopback: %v", err)
	}
	public := webhook("https://hooks.example/runway", false)
	for _, tc := range []struct {
		name string
		sub  *workloadv1.Subscription
	}{
		{"node lost", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_NODE_LOST}, Channel: public}},
		{"GPU unhealthy", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_GPU_UNHEALTHY}, Channel: public}},
		{"department over quota", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA}, Channel: public}},
		{"projects over quota, account-wide", &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_PROJECT_OVER_QUOTA}, Channel: public}},
		{"another project's workloads", &workloadv1.Subscription{Events: failed, Project: "projects/team-b", Channel: public}},
		{"a project that does not exist", &workloadv1.Subscription{Events: failed, Project: "projects/nope", Channel: public}},
	} {
		if err := create(bn, tc.sub); status.Code(err) != codes.PermissionDenied {
			t.Errorf("bob subscribing to %s: %v, want PermissionDenied", tc.name, err)
		}
	}
	// The administrator may; and bob to his own project's over-quota.
	admin := workloadv1.NewNotificationServiceClient(tn.admin)
	if err := create(admin, &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_NODE_LOST,
		workloadv1.NotificationEvent_NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA}, Channel: public}); err != nil {
		t.Errorf("the administrator subscribing to the cluster's events: %v", err)
	}
	if err := create(bn, &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_PROJECT_OVER_QUOTA},
		Project: "projects/team-a", Channel: public}); err != nil {
		t.Errorf("bob subscribing to team-a over quota: %v", err)
	}
	if err := create(bn, &workloadv1.Subscription{Events: failed, Channel: public}); err != nil {
		t.Errorf("bob's second subscription: %v", err)
	}
	if err := create(bn, &workloadv1.Subscription{Events: failed, Channel: public}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("bob's third subscription (cap 2): %v, want ResourceExhausted", err)
	}
	// Thresholds are required with their events.
	err = create(admin, &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_PENDING_TOO_LONG}, Channel: public})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "pending_threshold") {
		t.Errorf("pending without a threshold: %v", err)
	}
}
