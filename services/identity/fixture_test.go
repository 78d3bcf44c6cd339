package identity_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/services/identity"
)

// clock is a settable clock shared by the guard and the service.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logs collects everything the server and the guard log.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// env is the IdentityService behind pkg/auth's guard on a real server over
// an embedded etcd: every call is authenticated, authorised and audited as
// in production.
type env struct {
	addr     string
	etcd     *clientv3.Client
	clock    *clock
	logs     *logs
	guard    *auth.Guard
	svc      *identity.Server
	password string // the bootstrap administrator's one-time password
	admin    identityv1.IdentityServiceClient
}

type options struct {
	auth identity.Config
	cfg  auth.Config
}

func newEnv(t *testing.T, opts ...func(*options)) *env {
	t.Helper()
	o := options{auth: identity.Config{BcryptCost: bcrypt.MinCost}}
	for _, f := range opts {
		f(&o)
	}
	cluster := etcdtest.New(t)
	e := &env{clock: &clock{t: time.Now()}, logs: &logs{}, etcd: cluster.Client}
	logger := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	e.guard, err = auth.New(ctx, o.cfg, auth.Deps{Client: cluster.Client, Logger: logger, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.svc, err = identity.New(o.auth, identity.Deps{Client: cluster.Client, Guard: e.guard, Logger: logger, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0", Logger: logger,
		Auth: e.guard.UnaryInterceptor, AuthStream: e.guard.StreamInterceptor})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(e.svc.Register)
	srv.RegisterGateway(e.svc.RegisterGateway)
	e.addr = srv.Addr()
	done := make(chan struct{}, 2)
	go func() { _ = e.guard.Run(ctx); done <- struct{}{} }()
	go func() { _ = srv.Serve(ctx); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done })

	if e.password, err = e.svc.Bootstrap(t.Context()); err != nil || e.password == "" {
		t.Fatalf("Bootstrap: %q, %v", e.password, err)
	}
	e.sync(t)
	tok, err := e.svc.Token(t.Context(), identity.BootstrapAdmin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e.admin = e.client(t, tok)
	return e
}

// sync waits until the guard has seen every write so far.
func (e *env) sync(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.guard.Sync(ctx); err != nil {
		t.Fatalf("guard.Sync: %v", err)
	}
}

// client is an IdentityService client sending token ("" for none).
func (e *env) client(t *testing.T, token string) identityv1.IdentityServiceClient {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(auth.Bearer(token)))
	}
	conn, err := grpc.NewClient("passthrough:///"+e.addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return identityv1.NewIdentityServiceClient(conn)
}

// user creates a user with password (temporary), signs in once changing it
// to password+"!", and returns the new password.
func (e *env) user(t *testing.T, id string, groups ...string) string {
	t.Helper()
	first := "first password of " + id
	if _, err := e.admin.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: id,
		User: &identityv1.User{Email: id + "@example.com", Password: first, Groups: groups}}); err != nil {
		t.Fatalf("CreateUser(%s): %v", id, err)
	}
	e.sync(t)
	second := first + "!"
	if _, err := e.login(t, id, first, second); err != nil {
		t.Fatalf("first Login(%s): %v", id, err)
	}
	return second
}

func (e *env) login(t *testing.T, user, password, newPassword string) (*identityv1.LoginResponse, error) {
	t.Helper()
	r, err := e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
		Password: &identityv1.PasswordCredentials{User: user, Password: password, NewPassword: newPassword}}})
	if err == nil {
		e.sync(t)
	}
	return r, err
}

func (e *env) grant(t *testing.T, kind identityv1.SubjectKind, subject, role string) {
	t.Helper()
	if _, err := e.admin.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: kind, Name: subject}, Role: role,
		Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT}}}); err != nil {
		t.Fatalf("CreateAccessRule(%s %s): %v", subject, role, err)
	}
	e.sync(t)
}
