package hostile

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// apiFlood sends requests from a few clients as fast as they go until
// stopped (or maxCalls are sent) and counts them and their answers.
type apiFlood struct {
	sent, unexpected atomic.Int64
	stop             chan struct{}
	wg               sync.WaitGroup
	codes            sync.Map
}

func apiStartFlood(d *apiDev, method, path string, maxCalls int64, ok ...int) *apiFlood {
	f := &apiFlood{stop: make(chan struct{})}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}, Timeout: 10 * time.Second}
	// Few clients for the cores: they run in this process, and their own
	// CPU is not the server's cost.
	for range max(2, runtime.NumCPU()/4) {
		f.wg.Go(func() {
			for {
				select {
				case <-f.stop:
					return
				default:
				}
				if f.sent.Add(1) > maxCalls {
					f.sent.Add(-1)
					return
				}
				req, _ := http.NewRequest(method, "http://"+d.addr+path, strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					f.unexpected.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				f.codes.Store(resp.StatusCode, true)
				if !slices.Contains(ok, resp.StatusCode) {
					f.unexpected.Add(1)
				}
			}
		})
	}
	return f
}

// end stops the flood and returns the HTTP statuses it was answered.
func (f *apiFlood) end() []int {
	close(f.stop)
	f.wg.Wait()
	var seen []int
	f.codes.Range(func(k, _ any) bool { seen = append(seen, k.(int)); return true })
	slices.Sort(seen)
	return seen
}

// A flood of token-less POSTs over REST leaves the audit log bounded (a few
// aggregates whose counts add up to the calls), and an administrator's
// writes meanwhile take at most twice what they take under a flood of
// token-less GETs from the same clients, which take the same path through
// the gateway and the guard but were never audited: what the POSTs may not
// add is the audit's cost (the clients' own CPU on this machine is in
// both).
func TestHostileUnauthenticatedFloodBoundedAudit(t *testing.T) {
	d := apiStartDev(t, func(c *server.DevConfig) { c.Auth.RefusedWindow = 500 * time.Millisecond })
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
	write() // warm
	// Phases alternate, so that the machine's other load falls on both.
	const maxCalls = 12000
	var gets, refused []time.Duration
	var posts int64
	for round := range 3 {
		for _, phase := range []string{"gets", "posts"} {
			var f *apiFlood
			if phase == "gets" {
				f = apiStartFlood(d, http.MethodGet, "/v1/projects", maxCalls/3, http.StatusUnauthorized, http.StatusTooManyRequests)
			} else {
				f = apiStartFlood(d, http.MethodPost, "/v1/projects?project_id=flood", maxCalls/3,
					http.StatusUnauthorized, http.StatusTooManyRequests)
			}
			time.Sleep(200 * time.Millisecond) // under way
			for range 11 {
				if phase == "gets" {
					gets = append(gets, write())
				} else {
					refused = append(refused, write())
				}
			}
			seen := f.end()
			t.Logf("round %d, %s: %d calls answered %v", round, phase, f.sent.Load(), seen)
			if f.unexpected.Load() > 0 {
				t.Errorf("%s: %d calls failed or were answered other than %v", phase, f.unexpected.Load(), seen)
			}
			if phase == "posts" {
				posts += f.sent.Load()
			}
		}
	}
	slices.Sort(gets)
	slices.Sort(refused)
	base, during := gets[len(gets)/2], refused[len(refused)/2]
	t.Logf("the administrator's write: median %v under token-less GETs, %v under %d token-less POSTs", base, during, posts)
	if during > 2*base {
		t.Errorf("the administrator's write took %v under the flood of POSTs, over twice %v under GETs", during, base)
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
	// Windows of 500 ms over the flood's phases, two outcomes
	// (unauthenticated, limited) each: a few dozen events, not one per call.
	if events > 60 {
		t.Errorf("%d audit events for %d refused calls, want at most 60", events, posts)
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
