package hostile

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/services/identity"
)

// The API harness of the hostile-tenant suite: `runway dev` in this process
// (every service on one 127.0.0.1 listener over an embedded etcd) with two
// departments, dept-a holding team-a and dept-b holding team-b; and, for
// counting what a sign-in reads, the identity service alone behind its
// guard with its etcd client's reads counted.

var apiQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// apiDev is a running `runway dev`.
type apiDev struct {
	addr  string
	token string // the administrator's
	admin *grpc.ClientConn
}

// apiStartDev starts `runway dev` (change tunes its configuration) and
// creates the two departments and their projects.
func apiStartDev(t *testing.T, change func(*server.DevConfig)) *apiDev {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan error, 1)
	cfg := server.DevConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: apiQuiet,
		Identity:    identity.Config{BcryptCost: bcrypt.MinCost},
		EtcdOptions: []etcdtest.Option{etcdtest.WithTestSpeedups()}}
	if change != nil {
		change(&cfg)
	}
	go func() {
		done <- server.RunDev(ctx, cfg, func(addr, token string) { ready <- [2]string{addr, token} })
	}()
	var r [2]string
	select {
	case r = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("RunDev: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunDev: %v", err)
		}
	})
	d := &apiDev{addr: r[0], token: r[1]}
	d.admin = d.conn(t, r[1])
	q := quotav1.NewQuotaServiceClient(d.admin)
	for _, id := range []string{"dept-a", "dept-b"} {
		if _, err := q.CreateDepartment(t.Context(), &quotav1.CreateDepartmentRequest{DepartmentId: id,
			Department: &quotav1.Department{}}); err != nil {
			t.Fatalf("CreateDepartment(%s): %v", id, err)
		}
	}
	for p, dept := range map[string]string{"team-a": "dept-a", "team-b": "dept-b"} {
		if _, err := q.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: p,
			Project: &quotav1.Project{Department: "departments/" + dept}}); err != nil {
			t.Fatalf("CreateProject(%s): %v", p, err)
		}
	}
	return d
}

// conn is a connection sending token ("" for none).
func (d *apiDev) conn(t *testing.T, token string) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.Bearer(token)))
	}
	c, err := grpc.NewClient("passthrough:///"+d.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// member creates user id holding role on scope, signs it in and returns its
// token, once its rule applies.
func (d *apiDev) member(t *testing.T, id, role string, scope *identityv1.Scope) string {
	t.Helper()
	ids := identityv1.NewIdentityServiceClient(d.admin)
	first, second := "first password of "+id, "second password of "+id
	if _, err := ids.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: id,
		User: &identityv1.User{Email: id + "@example.com", Password: first}}); err != nil {
		t.Fatalf("CreateUser(%s): %v", id, err)
	}
	if _, err := ids.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/" + id},
		Role:    role, Scope: scope}}); err != nil {
		t.Fatalf("CreateAccessRule(%s %s): %v", id, role, err)
	}
	var token string
	apiEventually(t, "the sign-in of "+id, func() error {
		r, err := ids.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
			Password: &identityv1.PasswordCredentials{User: id, Password: first, NewPassword: second}}})
		if err != nil {
			r, err = ids.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
				Password: &identityv1.PasswordCredentials{User: id, Password: second}}})
		}
		if err != nil {
			return err
		}
		c, err := identityv1.NewIdentityServiceClient(d.conn(t, r.GetAccessToken())).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
		if err != nil {
			return err
		}
		if len(c.GetAccessRules()) != 1 {
			return fmt.Errorf("rules %v", c.GetAccessRules())
		}
		token = r.GetAccessToken()
		return nil
	})
	return token
}

func apiEventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func apiScope(kind identityv1.ScopeKind, name string) *identityv1.Scope {
	return &identityv1.Scope{Kind: kind, Name: name}
}

// apiReads counts the etcd reads made through a client: each Get, whether
// it was a range (a prefix or an interval, not one key), and the keys it
// returned, by the schema prefix it reads.
type apiReads struct {
	clientv3.KV
	mu     sync.Mutex
	gets   map[string]int // by prefix
	ranges map[string]int
	keys   map[string]int
}

func (r *apiReads) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := r.KV.Get(ctx, key, opts...)
	op := clientv3.OpGet(key, opts...)
	p := apiPrefixOf(key)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gets[p]++
	if len(op.RangeBytes()) > 0 {
		r.ranges[p]++
	}
	if err == nil {
		r.keys[p] += len(resp.Kvs)
	}
	return resp, err
}

// reset forgets what was counted and returns it.
func (r *apiReads) reset() (gets, ranges, keys map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	gets, ranges, keys = r.gets, r.ranges, r.keys
	r.gets, r.ranges, r.keys = map[string]int{}, map[string]int{}, map[string]int{}
	return gets, ranges, keys
}

// apiPrefixOf is the schema prefix a key is under ("/runway/v1/users/").
func apiPrefixOf(key string) string {
	best := ""
	for _, p := range etcdstore.Prefixes() {
		if strings.HasPrefix(key, p.Key) && len(p.Key) > len(best) {
			best = p.Key
		}
	}
	return best
}

// apiIdentity is the identity service behind its guard on 127.0.0.1 over
// an embedded etcd; the service's own etcd client counts its reads.
type apiIdentity struct {
	admin identityv1.IdentityServiceClient
	anon  identityv1.IdentityServiceClient
	reads *apiReads
	guard *auth.Guard
}

func apiStartIdentity(t *testing.T) *apiIdentity {
	t.Helper()
	cluster := etcdtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	guard, err := auth.New(ctx, auth.Config{}, auth.Deps{Client: cluster.Client, Logger: apiQuiet})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	counted := cluster.NewClient(t)
	reads := &apiReads{KV: counted.KV}
	reads.reset()
	counted.KV = reads
	svc, err := identity.New(identity.Config{BcryptCost: bcrypt.MinCost}, identity.Deps{Client: counted, Guard: guard, Logger: apiQuiet})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0", Logger: apiQuiet,
		Auth: guard.UnaryInterceptor, AuthStream: guard.StreamInterceptor})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	srv.Register(svc.Register)
	done := make(chan struct{}, 2)
	go func() { _ = guard.Run(ctx); done <- struct{}{} }()
	go func() { _ = srv.Serve(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })
	if _, err := svc.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := guard.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	tok, err := svc.Token(t.Context(), identity.BootstrapAdmin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(token string) identityv1.IdentityServiceClient {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if token != "" {
			opts = append(opts, grpc.WithPerRPCCredentials(auth.Bearer(token)))
		}
		c, err := grpc.NewClient("passthrough:///"+srv.Addr(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return identityv1.NewIdentityServiceClient(c)
	}
	return &apiIdentity{admin: dial(tok), anon: dial(""), reads: reads, guard: guard}
}
