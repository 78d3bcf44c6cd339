package toolproxy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/toolproxy"
)

// tools is a ToolService on a real gRPC server standing in for the
// workload service: it lets in the bearer "good" only and points every
// tool at addr. (The workload service's own answers, through the guard, are
// cmd/runway's TestCLI_ToolProxy.)
type tools struct {
	workloadv1.UnimplementedToolServiceServer
	addr  string
	calls atomic.Int32
}

func (s *tools) ResolveTool(ctx context.Context, _ *workloadv1.ResolveToolRequest) (*workloadv1.ToolTarget, error) {
	s.calls.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	if a := md.Get("authorization"); len(a) == 0 || a[0] != "Bearer good" {
		return nil, status.Error(codes.PermissionDenied, "no")
	}
	return &workloadv1.ToolTarget{Address: s.addr, PathPrefix: "/app"}, nil
}

// start serves the proxy with cfg's bounds in front of pod, and returns
// its URL for tool web of projects/p/workloads/w.
func start(t *testing.T, cfg toolproxy.Config, pod http.Handler) (string, *tools) {
	t.Helper()
	upstream := httptest.NewServer(pod)
	t.Cleanup(upstream.Close)
	svc := &tools{addr: upstream.Listener.Addr().String()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	workloadv1.RegisterToolServiceServer(gs, svc)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	cfg.Tools = workloadv1.NewToolServiceClient(conn)
	p, err := toolproxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Config = p.Server()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL + "/proxy/projects/p/workloads/w/web/", svc
}

func do(t *testing.T, method, url string, body io.Reader, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var good = http.Header{"Authorization": {"Bearer good"}}

// Every request is bounded: a body over MaxBodyBytes is refused (413)
// before the pod has it all, headers over MaxHeaderBytes never reach it
// (431), a pod slower than RequestTimeout is cut off, and a WebSocket ends
// at WebSocketLifetime.
func TestBounds(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/app/upload", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		_, _ = io.WriteString(w, "stored")
	})
	mux.HandleFunc("/app/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
			_, _ = io.WriteString(w, "late")
		}
	})
	up := websocket.Upgrader{}
	mux.HandleFunc("/app/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			typ, m, err := c.ReadMessage()
			if err != nil || c.WriteMessage(typ, m) != nil {
				return
			}
		}
	})
	url, _ := start(t, toolproxy.Config{MaxBodyBytes: 1 << 10, MaxHeaderBytes: 4 << 10,
		RequestTimeout: 300 * time.Millisecond, WebSocketLifetime: 700 * time.Millisecond}, mux)

	if resp, body := do(t, http.MethodPost, url+"upload", strings.NewReader(strings.Repeat("x", 1<<10)), good); resp.StatusCode != http.StatusOK {
		t.Errorf("a body at the limit: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, http.MethodPost, url+"upload", strings.NewReader(strings.Repeat("x", 1<<10+1)), good); resp.StatusCode < 400 || body == "stored" {
		t.Errorf("a body over the limit: %d %s, want it refused", resp.StatusCode, body)
	}
	big := good.Clone()
	big.Set("X-Padding", strings.Repeat("y", 8<<10))
	if resp, _ := do(t, http.MethodGet, url+"upload", nil, big); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("headers over the limit: %d, want 431", resp.StatusCode)
	}
	start := time.Now()
	if resp, body := do(t, http.MethodGet, url+"slow", nil, good); resp.StatusCode != http.StatusBadGateway || time.Since(start) > 5*time.Second {
		t.Errorf("a pod past the request timeout: %d %q after %v, want 502 at once", resp.StatusCode, body, time.Since(start))
	}

	c, _, err := websocket.DefaultDialer.Dial(strings.Replace(url, "http://", "ws://", 1)+"ws", good)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, m, err := c.ReadMessage(); err != nil || string(m) != "hi" {
		t.Fatalf("the WebSocket echoed %q, %v", m, err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	opened := time.Now()
	if _, _, err := c.ReadMessage(); err == nil || time.Since(opened) > 4*time.Second {
		t.Errorf("the WebSocket outlived its lifetime: read %v after %v", err, time.Since(opened))
	}
}

// The pod gets the request as the tool sees it: under its path prefix,
// without the caller's Authorization or the proxy's cookie (its own pass),
// with X-Forwarded-* the proxy's, not the client's; it cannot set the
// proxy's cookie. A refusal is asked again each time; a yes is reused
// within Recheck.
func TestRequestToThePod(t *testing.T) {
	var seen atomic.Pointer[http.Request]
	url, svc := start(t, toolproxy.Config{Recheck: time.Minute}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r)
		http.SetCookie(w, &http.Cookie{Name: toolproxy.CookieName, Value: "pod's", Path: "/"})
		http.SetCookie(w, &http.Cookie{Name: "own", Value: "1"})
		_, _ = io.WriteString(w, "ok")
	}))
	h := good.Clone()
	h.Set("Cookie", toolproxy.CookieName+"=secret; own=1")
	h.Set("X-Forwarded-For", "203.0.113.9")
	h.Set("X-Forwarded-Host", "evil.example")
	resp, _ := do(t, http.MethodGet, url+"lab/tree?a=b", nil, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := seen.Load()
	if r.URL.Path != "/app/lab/tree" || r.URL.RawQuery != "a=b" {
		t.Errorf("the pod got %s?%s, want /app/lab/tree?a=b", r.URL.Path, r.URL.RawQuery)
	}
	if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "own=1" {
		t.Errorf("the pod got Authorization %q, Cookie %q", r.Header.Get("Authorization"), r.Header.Get("Cookie"))
	}
	if xff := r.Header.Get("X-Forwarded-For"); xff != "127.0.0.1" || r.Header.Get("X-Forwarded-Host") == "evil.example" {
		t.Errorf("the pod got X-Forwarded-For %q, X-Forwarded-Host %q: the client's", xff, r.Header.Get("X-Forwarded-Host"))
	}
	if got := r.Header.Get("X-Forwarded-Prefix"); got != "/proxy/projects/p/workloads/w/web" {
		t.Errorf("X-Forwarded-Prefix %q", got)
	}
	for _, c := range resp.Cookies() {
		if c.Name == toolproxy.CookieName {
			t.Errorf("the pod set the proxy's cookie: %v", c)
		}
	}
	if len(resp.Cookies()) != 1 {
		t.Errorf("cookies %v, want the pod's own", resp.Cookies())
	}

	before := svc.calls.Load()
	do(t, http.MethodGet, url, nil, good)
	if svc.calls.Load() != before {
		t.Errorf("a yes was asked again within Recheck")
	}
	bad := http.Header{"Authorization": {"Bearer bad"}}
	for range 2 {
		if resp, _ := do(t, http.MethodGet, url, nil, bad); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a refused caller: %d, want 403", resp.StatusCode)
		}
	}
	if got := svc.calls.Load() - before; got != 2 {
		t.Errorf("two refused requests asked %d times, want 2", got)
	}

	// Paths that are no tool's, and a tool's root without its slash.
	if resp, _ := do(t, http.MethodGet, strings.Replace(url, "/proxy/projects/p/workloads/w/web/", "/proxy/projects/p/", 1), nil, good); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a path that names no tool: %d, want 404", resp.StatusCode)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, strings.TrimSuffix(url, "/"), nil)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/proxy/projects/p/workloads/w/web/" {
		t.Errorf("the tool's root without a slash: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}
