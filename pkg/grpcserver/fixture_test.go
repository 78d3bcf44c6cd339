package grpcserver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

// quotaService is the smallest QuotaService that exercises the server:
// one project exists, ids are checked, one method panics, one fails with an
// internal error, and ListProjects can be held in flight.
type quotaService struct {
	quotav1.UnimplementedQuotaServiceServer
	entered chan struct{} // ListProjects with page_token "hold" signals here...
	release chan struct{} // ...and waits for this to close
}

var projectID = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

func (q *quotaService) GetProject(_ context.Context, req *quotav1.GetProjectRequest) (*quotav1.Project, error) {
	if req.GetName() != "projects/team-a" {
		return nil, apierr.NotFound(apierr.Project, req.GetName())
	}
	return &quotav1.Project{Name: req.GetName()}, nil
}

func (q *quotaService) CreateProject(_ context.Context, req *quotav1.CreateProjectRequest) (*quotav1.Project, error) {
	if !projectID.MatchString(req.GetProjectId()) {
		return nil, apierr.InvalidField("project_id", "must be 1-63 characters of [a-z0-9-] starting with a letter")
	}
	return &quotav1.Project{Name: "projects/" + req.GetProjectId()}, nil
}

func (q *quotaService) DeleteProject(context.Context, *quotav1.DeleteProjectRequest) (*emptypb.Empty, error) {
	panic("the handler has a bug")
}

func (q *quotaService) GetSettings(context.Context, *quotav1.GetSettingsRequest) (*quotav1.Settings, error) {
	return nil, errors.New("etcdserver: leader changed while reading /runway/v1/settings")
}

func (q *quotaService) ListProjects(ctx context.Context, req *quotav1.ListProjectsRequest) (*quotav1.ListProjectsResponse, error) {
	if req.GetPageToken() == "hold" {
		q.entered <- struct{}{}
		select {
		case <-q.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &quotav1.ListProjectsResponse{Projects: []*quotav1.Project{{Name: "projects/team-a"}}}, nil
}

// auth is a stand-in for pkg/auth: "Bearer bad" is rejected, and the last
// authorization seen is kept so tests can check it arrived.
type auth struct {
	mu   sync.Mutex
	seen string
}

func (a *auth) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var got string
	if v := md.Get("authorization"); len(v) > 0 {
		got = v[0]
	}
	a.mu.Lock()
	a.seen = got
	a.mu.Unlock()
	if got == "Bearer bad" {
		return nil, apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID)
	}
	return handler(ctx, req)
}

func (a *auth) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen
}

// logBuffer collects the server's log for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// env is one running server with a gRPC client and an HTTP client.
type env struct {
	addr    string
	quota   *quotaService
	auth    *auth
	logs    *logBuffer
	conn    *grpc.ClientConn
	client  quotav1.QuotaServiceClient
	http    *http.Client
	stop    context.CancelFunc
	stopped chan error // Serve's result
}

const openAPI = `{"swagger":"2.0","info":{"title":"runway test"}}`

// start serves the quota fixture on 127.0.0.1:0; the server is stopped and
// checked when the test ends unless the test stops it itself.
func start(t *testing.T, adjust ...func(*grpcserver.Config)) *env {
	t.Helper()
	e := &env{
		quota: &quotaService{entered: make(chan struct{}, 2), release: make(chan struct{})},
		auth:  &auth{},
		logs:  &logBuffer{},
	}
	cfg := grpcserver.Config{
		Listen:  "127.0.0.1:0",
		Logger:  slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Auth:    e.auth.unary,
		OpenAPI: []byte(openAPI),
	}
	for _, f := range adjust {
		f(&cfg)
	}
	srv, err := grpcserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(func(g *grpc.Server) { quotav1.RegisterQuotaServiceServer(g, e.quota) })
	srv.RegisterGateway(quotav1.RegisterQuotaServiceHandler)
	e.addr = srv.Addr()

	ctx, cancel := context.WithCancel(context.Background())
	e.stop, e.stopped = cancel, make(chan error, 1)
	go func() { e.stopped <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-e.stopped; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	e.conn, err = grpc.NewClient("passthrough:///"+e.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.conn.Close() })
	e.client = quotav1.NewQuotaServiceClient(e.conn)
	transport := &http.Transport{}
	e.http = &http.Client{Transport: transport, Timeout: 10 * time.Second}
	t.Cleanup(transport.CloseIdleConnections)
	return e
}

// do sends one REST request and returns the response and its body.
func (e *env) do(t *testing.T, method, path, body string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+e.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// waitFor polls cond until it holds or the deadline passes (no sleeps).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
