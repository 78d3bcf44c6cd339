package hostile

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/runwayhq/runway/cmd/runway/server"
	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/workload"
)

func apiWant(t *testing.T, what string, err error, code codes.Code, reason commonv1.ErrorReason) {
	t.Helper()
	if status.Code(err) != code || apierr.Reason(err) != reason.String() {
		t.Fatalf("%s: %v, want %s %s", what, err, code, reason)
	}
}

// One viewer holding every watch stream it may (the all-projects watch of
// the UI's Workloads view) is refused its next one for its own cap, and
// another viewer still watches every project, and a project.
func TestHostileWatchExhaustionIsPerCaller(t *testing.T) {
	d := apiStartDev(t, nil)
	account := apiScope(identityv1.ScopeKind_SCOPE_KIND_ACCOUNT, "")
	greedy := workloadv1.NewWorkloadServiceClient(d.conn(t, d.member(t, "greedy", "roles/viewer", account)))
	other := workloadv1.NewWorkloadServiceClient(d.conn(t, d.member(t, "other", "roles/viewer", account)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watch := func(c workloadv1.WorkloadServiceClient, parent string) error {
		w, err := c.WatchWorkloads(ctx, &workloadv1.WatchWorkloadsRequest{Parent: parent})
		if err != nil {
			return err
		}
		for {
			ev, err := w.Recv()
			if err != nil {
				return err
			}
			if ev.GetType() == workloadv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED {
				return nil // held open until ctx ends
			}
		}
	}
	held := 0
	var err error
	for held < 4*workload.DefaultMaxWatchesPerCaller {
		if err = watch(greedy, "projects/-"); err != nil {
			break
		}
		held++
	}
	if held != workload.DefaultMaxWatchesPerCaller {
		t.Fatalf("greedy held %d watches of every project before a refusal (%v), want its cap %d",
			held, err, workload.DefaultMaxWatchesPerCaller)
	}
	apiWant(t, "greedy's watch past its cap", err, codes.ResourceExhausted, commonv1.ErrorReason_WATCH_LIMIT_EXCEEDED)
	if md := apierr.Info(err).GetMetadata(); md["caller"] != "users/greedy" {
		t.Errorf("the refusal names %v, want users/greedy", md)
	}
	if err := watch(other, "projects/-"); err != nil {
		t.Errorf("another viewer's watch of every project while greedy holds its cap: %v", err)
	}
	if err := watch(other, "projects/team-b"); err != nil {
		t.Errorf("another viewer's watch of a project: %v", err)
	}
}

// apiFlood is a flood of token-less requests from a few clients
// (testdata/flood), each sending its next call as soon as the last is
// answered. It is its own process at the lowest CPU priority: an attacker's
// clients run on its own machines, so what the server's other callers may
// feel is the server's work for the flood, not the clients' (on this
// machine they take only what the server and every other process leave).
type apiFlood struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   syncBuffer
}

// apiFloodClients is how many clients drive a flood.
const apiFloodClients = 4

func apiStartFlood(t *testing.T, d *apiDev, method, path string) *apiFlood {
	t.Helper()
	f := &apiFlood{cmd: exec.Command("nice", "-n", "19", credsBuild(t, "flood", "./services/e2e/hostile/testdata/flood", false),
		"-clients", strconv.Itoa(apiFloodClients), "-method", method, "-url", "http://"+d.addr+path)}
	f.cmd.Stdout, f.cmd.Stderr = &f.out, &f.out
	var err error
	if f.stdin, err = f.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("start the flood: %v", err)
	}
	t.Cleanup(func() { _ = f.stdin.Close(); _ = f.cmd.Wait() })
	return f
}

// end stops the flood and returns how many calls it sent, how many failed
// (no answer), and the count of each HTTP status it was answered.
func (f *apiFlood) end(t *testing.T) (sent, failed int64, statuses map[int]int64) {
	t.Helper()
	_ = f.stdin.Close()
	if err := f.cmd.Wait(); err != nil {
		t.Fatalf("the flood: %v\n%s", err, f.out.String())
	}
	fields := strings.Fields(f.out.String())
	if len(fields) < 3 || fields[0] != "SENT" {
		t.Fatalf("the flood's report: %q", f.out.String())
	}
	sent, _ = strconv.ParseInt(fields[1], 10, 64)
	failed, _ = strconv.ParseInt(fields[2], 10, 64)
	statuses = map[int]int64{}
	for _, kv := range fields[3:] {
		k, v, _ := strings.Cut(kv, "=")
		code, _ := strconv.Atoi(k)
		statuses[code], _ = strconv.ParseInt(v, 10, 64)
	}
	return sent, failed, statuses
}

// A flood of token-less POSTs over REST, as fast as a few clients drive
// it, leaves the audit log bounded (a few aggregates whose counts add up to
// the calls), and the median of an administrator's writes meanwhile is at
// most twice its median with no flood at all, both measured here: quiet and
// flooded phases alternate, so the machine's other load falls on both
// sides, and each side is the median of many writes.
func TestHostileUnauthenticatedFloodBoundedAudit(t *testing.T) {
	const window = 500 * time.Millisecond
	d := apiStartDev(t, func(c *server.DevConfig) { c.Auth.RefusedWindow = window })
	q := quotav1.NewQuotaServiceClient(d.admin)
	n := 0
	write := func() time.Duration {
		n++
		start := time.Now()
		if _, err := q.UpdateDepartment(t.Context(), &quotav1.UpdateDepartmentRequest{
			Department: &quotav1.Department{Name: "departments/dept-a", Description: fmt.Sprintf("write %d", n)},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}}); err != nil {
			t.Fatalf("the administrator's write: %v", err)
		}
		return time.Since(start)
	}
	for range 5 {
		write() // warm
	}
	const rounds, writes = 6, 20
	var quiet, flooded []time.Duration
	var posts int64
	var floodTime time.Duration
	maxEvents := 0
	for round := range rounds {
		for range writes {
			quiet = append(quiet, write())
		}
		f := apiStartFlood(t, d, http.MethodPost, "/v1/projects?project_id=flood")
		began := time.Now()
		time.Sleep(300 * time.Millisecond) // under way, the host's burst spent
		for range writes {
			flooded = append(flooded, write())
		}
		sent, failed, statuses := f.end(t)
		took := time.Since(began)
		floodTime += took
		// Two outcomes (unauthenticated, limited) in each window the
		// round spans.
		maxEvents += 2 * (int(took/window) + 2)
		t.Logf("round %d: %d token-less POSTs in %v answered %v", round, sent, took.Round(time.Millisecond), statuses)
		if answered := statuses[http.StatusUnauthorized] + statuses[http.StatusTooManyRequests]; failed > 0 || answered != sent {
			t.Errorf("round %d: of %d calls %d failed and %d were answered 401 or 429: %v", round, sent, failed, answered, statuses)
		}
		posts += sent
	}
	median := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	base, during := median(quiet), median(flooded)
	rate := float64(posts) / floodTime.Seconds()
	t.Logf("the administrator's write: median %v with no flood, %v under %d token-less POSTs (%.0f a second from %d clients)",
		base, during, posts, rate, apiFloodClients)
	if during > 2*base {
		t.Errorf("the administrator's write took %v (median) under the flood, over twice %v with none", during, base)
	}

	// The refused calls are a few aggregates whose counts add up to them.
	ids := identityv1.NewIdentityServiceClient(d.admin)
	var events int
	apiEventually(t, "the flood's aggregates in the audit log", func() error {
		events = 0
		var total int64
		token := ""
		for {
			r, err := ids.ListAuditEvents(t.Context(), &identityv1.ListAuditEventsRequest{PageSize: 1000, PageToken: token,
				Filter: `method = "/runway.quota.v1.QuotaService/CreateProject"`})
			if err != nil {
				return err
			}
			for _, ev := range r.GetAuditEvents() {
				if ev.GetPrincipal() != "" {
					continue
				}
				events++
				total += max(ev.GetCount(), 1)
				if ev.GetStatusCode() != int32(codes.Unauthenticated) && ev.GetStatusCode() != int32(codes.ResourceExhausted) {
					return fmt.Errorf("an aggregate with status %d (%s)", ev.GetStatusCode(), ev.GetErrorReason())
				}
			}
			if token = r.GetNextPageToken(); token == "" {
				break
			}
		}
		if total != posts {
			return fmt.Errorf("the aggregates count %d calls in %d events, want %d", total, events, posts)
		}
		return nil
	})
	// A few dozen events, not one per call.
	if events > maxEvents {
		t.Errorf("%d audit events for %d refused calls, want at most %d", events, posts, maxEvents)
	}
	t.Logf("audit: %d events for %d refused calls", events, posts)
}

// A sign-in by email reads one user record (and one index key), whatever
// the number of users: the same reads with 3 users and with 203.
func TestHostileEmailLoginCost(t *testing.T) {
	e := apiStartIdentity(t)
	create := func(id string) {
		if _, err := e.admin.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: id,
			User: &identityv1.User{Email: id + "@example.com", Password: "first password of " + id}}); err != nil {
			t.Fatalf("CreateUser(%s): %v", id, err)
		}
	}
	login := func(who, password, next string) error {
		_, err := e.anon.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
			Password: &identityv1.PasswordCredentials{User: who, Password: password, NewPassword: next}}})
		return err
	}
	create("ivy")
	create("u1")
	if err := e.guard.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := login("ivy@example.com", "first password of ivy", "second password of ivy"); err != nil {
		t.Fatalf("ivy's first sign-in by email: %v", err)
	}
	measure := func() (gets, ranges, keys map[string]int) {
		t.Helper()
		e.reads.reset()
		if err := login("IVY@example.com", "second password of ivy", ""); err != nil {
			t.Fatalf("ivy's sign-in by email: %v", err)
		}
		return e.reads.reset()
	}
	gets1, _, keys1 := measure()
	for i := range 200 {
		create(fmt.Sprintf("v%d", i))
	}
	gets2, ranges2, keys2 := measure()
	t.Logf("a sign-in by email with 3 users: gets %v keys %v; with 203: gets %v keys %v", gets1, keys1, gets2, keys2)
	users := etcdstore.PrefixUsers
	if gets2[users] != 1 || ranges2[users] != 0 || keys2[users] != 1 {
		t.Errorf("with 203 users the sign-in read %d times (%d ranges, %d keys) under %s, want one key once",
			gets2[users], ranges2[users], keys2[users], users)
	}
	// The ranges it may read are bounded per name or per user, not by the
	// users: its recent failures, and ivy's own sessions (to cap them; one
	// more each sign-in, so their keys are not compared).
	delete(keys1, etcdstore.PrefixUserSessions)
	delete(keys2, etcdstore.PrefixUserSessions)
	if !mapsEqual(gets1, gets2) || !mapsEqual(keys1, keys2) {
		t.Errorf("the sign-in's reads grew with the users: %v / %v keys, then %v / %v", gets1, keys1, gets2, keys2)
	}
	for p, n := range ranges2 {
		if p != etcdstore.PrefixSignInFailures && p != etcdstore.PrefixUserSessions && n > 0 {
			t.Errorf("the sign-in read a range of %s", p)
		}
	}
	// An unknown email reads its index key and no user.
	e.reads.reset()
	if err := login("nobody@example.com", "a wrong password", ""); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("an unknown email: %v, want Unauthenticated", err)
	}
	if gets, _, _ := e.reads.reset(); gets[users] != 0 || gets[etcdstore.PrefixUserEmails] != 1 {
		t.Errorf("an unknown email read %v, want its index key and no user", gets)
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A department's administrator cannot delete (or change) the scheduling
// rules the account set on its department; it still edits the rest of it.
func TestHostileDepartmentAdminDeletesAccountRule(t *testing.T) {
	d := apiStartDev(t, nil)
	q := quotav1.NewQuotaServiceClient(d.admin)
	rules := []*quotav1.SchedulingRules{{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		TimeLimit: durationpb.New(8 * time.Hour)}}
	if _, err := q.UpdateDepartment(t.Context(), &quotav1.UpdateDepartmentRequest{
		Department: &quotav1.Department{Name: "departments/dept-a", SchedulingRules: rules},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"scheduling_rules"}}}); err != nil {
		t.Fatalf("the account sets dept-a's rules: %v", err)
	}
	da := quotav1.NewQuotaServiceClient(d.conn(t, d.member(t, "da", "roles/department-admin",
		apiScope(identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, "departments/dept-a"))))
	for what, req := range map[string]*quotav1.UpdateDepartmentRequest{
		"delete the rules": {Department: &quotav1.Department{Name: "departments/dept-a"},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"scheduling_rules"}}},
		"loosen the rules": {Department: &quotav1.Department{Name: "departments/dept-a", SchedulingRules: []*quotav1.SchedulingRules{
			{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, TimeLimit: durationpb.New(800 * time.Hour)}}},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"scheduling_rules"}}},
		"replace the department": {Department: &quotav1.Department{Name: "departments/dept-a", Description: "mine"},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"*"}}},
	} {
		_, err := da.UpdateDepartment(t.Context(), req)
		apiWant(t, "the department admin tries to "+what, err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
		if !strings.Contains(status.Convert(err).Message()+fmt.Sprint(apierr.Info(err).GetMetadata()), "account") {
			t.Errorf("%s: refused with %v, want the account named as the scope that may", what, err)
		}
	}
	got, err := q.GetDepartment(t.Context(), &quotav1.GetDepartmentRequest{Name: "departments/dept-a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetSchedulingRules()) != 1 || got.GetSchedulingRules()[0].GetTimeLimit().AsDuration() != 8*time.Hour {
		t.Errorf("dept-a's rules after the attempts: %v, want the account's", got.GetSchedulingRules())
	}
	// The refusal is for the rules: its own description it edits.
	if _, err := da.UpdateDepartment(t.Context(), &quotav1.UpdateDepartmentRequest{
		Department: &quotav1.Department{Name: "departments/dept-a", Description: "run by da"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}}); err != nil {
		t.Errorf("the department admin edits its department's description: %v", err)
	}
}

// Another department's environment, values and all, is not readable: not
// by name, not by listing its department, neither by that department's
// administrator nor by a project's viewer; its own department's is, from
// the department and from its projects.
func TestHostileReadOtherDepartmentEnvironment(t *testing.T) {
	d := apiStartDev(t, nil)
	gov := workloadv1.NewGovernanceServiceClient(d.admin)
	for _, dept := range []string{"dept-a", "dept-b"} {
		if _, err := gov.CreateEnvironment(t.Context(), &workloadv1.CreateEnvironmentRequest{Parent: "departments/" + dept,
			EnvironmentId: "jupyter", Environment: &workloadv1.Environment{Image: "jupyter/base",
				Env: []*workloadv1.EnvVar{{Name: "WANDB_API_KEY", Value: "value of " + dept}}}}); err != nil {
			t.Fatalf("CreateEnvironment(%s): %v", dept, err)
		}
	}
	readers := map[string]string{
		"dept-a's administrator": d.member(t, "da", "roles/department-admin", apiScope(identityv1.ScopeKind_SCOPE_KIND_DEPARTMENT, "departments/dept-a")),
		"a viewer of team-a":     d.member(t, "va", "roles/viewer", apiScope(identityv1.ScopeKind_SCOPE_KIND_PROJECT, "projects/team-a")),
	}
	for who, token := range readers {
		g := workloadv1.NewGovernanceServiceClient(d.conn(t, token))
		env, err := g.GetEnvironment(t.Context(), &workloadv1.GetEnvironmentRequest{Name: "departments/dept-b/environments/jupyter"})
		apiWant(t, who+" reads dept-b's environment", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
		if env != nil {
			t.Errorf("%s was sent %v", who, env)
		}
		list, err := g.ListEnvironments(t.Context(), &workloadv1.ListEnvironmentsRequest{Parent: "departments/dept-b"})
		apiWant(t, who+" lists dept-b's environments", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
		if strings.Contains(fmt.Sprint(list), "value of dept-b") {
			t.Errorf("%s was sent dept-b's values: %v", who, list)
		}
		// Where it may use them, it reads them.
		own, err := g.GetEnvironment(t.Context(), &workloadv1.GetEnvironmentRequest{Name: "departments/dept-a/environments/jupyter"})
		if err != nil || own.GetEnv()[0].GetValue() != "value of dept-a" {
			t.Errorf("%s reads dept-a's environment: %v, %v", who, own, err)
		}
	}
}
