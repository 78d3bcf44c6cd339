// Package toolproxy is Runway's authenticated proxy to what workloads
// serve: a workload's tools (WorkloadSpec.tools: Jupyter, VS Code, any
// HTTP and WebSocket server) at
//
//	/proxy/projects/{project}/workloads/{workload}/{tool}/...
//
// and inference workloads' serving endpoints (WorkloadSpec.serving) at
//
//	/serve/projects/{project}/inference/{workload}/...
//
// on a listener of its own, so that a tenant's page never runs script on the
// UI's or the API's origin.
//
// Only callers who may view the workload pass, and the proxy decides
// nothing itself: it asks the workload service (ToolService.ResolveTool)
// with the caller's own credential, and the guard judges that call as any
// other (pkg/auth). A yes is reused for the same credential and tool for
// Config.Recheck (1 s by default: a revoked access is refused within it);
// a refusal never is. API clients send their
// bearer token. A browser cannot send the UI's token to another origin, and
// the proxy never takes an API token from a cookie: the signed-in UI asks
// for a one-time ticket (CreateToolTicket) and opens the tool's URL with
// ?ticket=; the proxy trades it (ExchangeToolTicket) for a tool session
// bound to that workload, sets it as an HttpOnly, SameSite=Strict cookie
// whose path is the workload's (/proxy/projects/P/workloads/W/), and
// redirects to the URL without the ticket. The session is accepted by
// ResolveTool alone; the API refuses it everywhere else.
//
// An endpoint's access is its workload's (ToolService.ResolveEndpoint):
// public (anyone), authenticated (any API token) or project (who may view
// the project's workloads); its callers send bearer tokens, no cookie.
//
// The pod never sees the caller's credential: the Authorization header and
// the proxy's cookie are stripped before a request goes on (the pod's own
// cookies pass), and a pod cannot set the proxy's cookie. Every request
// is bounded: its headers (the server's MaxHeaderBytes), its body
// (MaxBodyBytes), its time (RequestTimeout; a WebSocket, which passes as
// an HTTP upgrade, WebSocketLifetime).
//
// The path form puts every workload's tools on one origin, so the cookie's
// path scopes where the browser sends it, not what a page there can
// script: a tool page can reach another workload's tools that the same
// browser holds a session for. Per-workload host names (a wildcard domain)
// are the boundary for that; this package does not serve them yet.
package toolproxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// CookieName is the proxy's session cookie.
const CookieName = "runway_tool_session"

// The defaults of Config's bounds.
const (
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxBodyBytes      = 256 << 20
	DefaultRequestTimeout    = 5 * time.Minute
	DefaultWebSocketLifetime = 12 * time.Hour
	DefaultRecheck           = time.Second
	// resolveTimeout bounds each question to the workload service.
	resolveTimeout = 10 * time.Second
	dialTimeout    = 10 * time.Second
)

// Config is the proxy's setup.
type Config struct {
	// Tools is the workload service's ToolService, called with each
	// caller's credential (the connection carries none of its own).
	// Required.
	Tools workloadv1.ToolServiceClient
	// MaxHeaderBytes bounds a request's headers; DefaultMaxHeaderBytes
	// when 0.
	MaxHeaderBytes int
	// MaxBodyBytes bounds a request's body; DefaultMaxBodyBytes when 0.
	MaxBodyBytes int64
	// RequestTimeout bounds a request from its headers to the end of its
	// response; DefaultRequestTimeout when 0.
	RequestTimeout time.Duration
	// WebSocketLifetime bounds an upgraded connection;
	// DefaultWebSocketLifetime when 0.
	WebSocketLifetime time.Duration
	// Recheck is how long one caller's answer from ResolveTool (its access
	// and the tool's address) is reused for the same tool; DefaultRecheck
	// when 0, a negative value asks on every request.
	Recheck time.Duration
	// Secure marks the cookie Secure: the proxy is served over TLS.
	Secure bool
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// Proxy is the proxy's HTTP handler.
type Proxy struct {
	cfg     Config
	proxy   *httputil.ReverseProxy
	answers *answers
}

// New returns the proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Tools == nil {
		return nil, errors.New("toolproxy: Config.Tools is required")
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.WebSocketLifetime <= 0 {
		cfg.WebSocketLifetime = DefaultWebSocketLifetime
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = DefaultRecheck
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	p := &Proxy{cfg: cfg, answers: newAnswers()}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: rewrite,
		// Never the environment's HTTP proxy: pods are dialled directly.
		Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: dialTimeout}).DialContext,
			MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: cfg.RequestTimeout,
			MaxResponseHeaderBytes: int64(cfg.MaxHeaderBytes)},
		ModifyResponse: dropOwnCookie,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			cfg.Logger.Info("tool proxy: the pod did not answer", "path", r.URL.Path, "err", err)
			http.Error(w, "the tool did not answer", http.StatusBadGateway)
		},
	}
	return p, nil
}

// Server is an http.Server for the proxy's listener, with its bounds on
// headers and idle connections (requests' own are the handler's).
func (p *Proxy) Server() *http.Server {
	return &http.Server{Handler: p, MaxHeaderBytes: p.cfg.MaxHeaderBytes, ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(p.cfg.Logger.Handler(), slog.LevelInfo)}
}

// target is one request's tool (its workload, name and the rest of its
// path) or inference endpoint (serve).
type target struct {
	workload, tool, rest string
	serve                bool
}

// prefix is the target's path on the proxy, without its final slash.
func (t target) prefix() string {
	if t.serve {
		return strings.TrimSuffix(clusterproto.EndpointPath(t.workload), "/")
	}
	return strings.TrimSuffix(clusterproto.ToolPath(t.workload, t.tool), "/")
}

// parseServePath splits /serve/projects/P/inference/W/REST.
func parseServePath(path string) (target, bool) {
	parts := strings.SplitN(strings.TrimPrefix(path, "/serve/"), "/", 5)
	if !strings.HasPrefix(path, "/serve/") || len(parts) < 4 || parts[0] != "projects" || parts[2] != "inference" {
		return target{}, false
	}
	t := target{workload: "projects/" + parts[1] + "/workloads/" + parts[3], serve: true}
	if _, _, ok := clusterproto.ParseWorkloadName(t.workload); !ok {
		return target{}, false
	}
	if len(parts) == 5 {
		t.rest = "/" + parts[4]
	}
	return t, true
}

// parsePath splits /proxy/projects/P/workloads/W/TOOL/REST.
func parsePath(path string) (target, bool) {
	parts := strings.SplitN(strings.TrimPrefix(path, "/proxy/"), "/", 6)
	if !strings.HasPrefix(path, "/proxy/") || len(parts) < 5 || parts[0] != "projects" || parts[2] != "workloads" {
		return target{}, false
	}
	t := target{workload: "projects/" + parts[1] + "/workloads/" + parts[3], tool: parts[4]}
	if _, _, ok := clusterproto.ParseWorkloadName(t.workload); !ok || t.tool == "" {
		return target{}, false
	}
	if len(parts) == 6 {
		t.rest = "/" + parts[5]
	}
	return t, true
}

// workloadPath is the cookie's path: the workload's.
func workloadPath(workload string) string { return "/proxy/" + workload + "/" }

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/serve/") {
		p.serveEndpoint(w, r)
		return
	}
	t, ok := parsePath(r.URL.Path)
	if !ok {
		http.Error(w, "not a tool: the path is /proxy/projects/{project}/workloads/{workload}/{tool}/", http.StatusNotFound)
		return
	}
	if t.rest == "" { // the tool's root is its path with a slash, where its relative links resolve
		u := *r.URL
		u.Path += "/"
		u.RawPath = ""
		http.Redirect(w, r, u.RequestURI(), http.StatusFound)
		return
	}
	if ticket := r.URL.Query().Get("ticket"); ticket != "" {
		p.exchange(w, r, t, ticket)
		return
	}
	cred := bearer(r)
	if cred == "" {
		if c, err := r.Cookie(CookieName); err == nil {
			cred = c.Value
		}
	}
	if cred == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="runway"`)
		http.Error(w, "sign in: send Authorization: Bearer TOKEN, or open the tool from the web UI", http.StatusUnauthorized)
		return
	}
	p.forward(w, r, cred, t)
}

// serveEndpoint passes a request to an inference workload's endpoint, for
// whom its access lets in (an API token or, public, anyone).
func (p *Proxy) serveEndpoint(w http.ResponseWriter, r *http.Request) {
	t, ok := parseServePath(r.URL.Path)
	if !ok {
		http.Error(w, "not an endpoint: the path is /serve/projects/{project}/inference/{workload}/", http.StatusNotFound)
		return
	}
	p.forward(w, r, bearer(r), t)
}

// forward resolves the target with the caller's credential and passes the
// request on, bounded.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, cred string, t target) {
	to, err := p.resolve(r, cred, t)
	if err != nil {
		refuse(w, err)
		return
	}
	limit := p.cfg.RequestTimeout
	if upgrade(r) {
		limit = p.cfg.WebSocketLifetime
	}
	ctx, cancel := context.WithTimeout(r.Context(), limit)
	defer cancel()
	r = r.WithContext(context.WithValue(ctx, toKey{}, resolved{t: t, to: to}))
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, p.cfg.MaxBodyBytes)
	}
	p.proxy.ServeHTTP(w, r)
}

// resolve asks the workload service where the tool is, with the caller's
// credential, or reuses its answer to the same caller within Recheck.
func (p *Proxy) resolve(r *http.Request, cred string, t target) (*workloadv1.ToolTarget, error) {
	key := answerKey(cred, t)
	if to, ok := p.answers.get(key); ok {
		return to, nil
	}
	ctx, cancel := context.WithTimeout(outgoing(r, cred), resolveTimeout)
	defer cancel()
	var to *workloadv1.ToolTarget
	var err error
	if t.serve {
		to, err = p.cfg.Tools.ResolveEndpoint(ctx, &workloadv1.ResolveEndpointRequest{Name: t.workload})
	} else {
		to, err = p.cfg.Tools.ResolveTool(ctx, &workloadv1.ResolveToolRequest{Name: t.workload, Tool: t.tool})
	}
	if err == nil && p.cfg.Recheck > 0 {
		p.answers.put(key, to, time.Now().Add(p.cfg.Recheck))
	}
	return to, err
}

// exchange trades a ticket for the session cookie and sends the browser to
// the URL without the ticket.
func (p *Proxy) exchange(w http.ResponseWriter, r *http.Request, t target, ticket string) {
	ctx, cancel := context.WithTimeout(outgoing(r, ticket), resolveTimeout)
	defer cancel()
	s, err := p.cfg.Tools.ExchangeToolTicket(ctx, &workloadv1.ExchangeToolTicketRequest{Name: t.workload, Tool: t.tool})
	if err != nil {
		refuse(w, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.GetSession(), Path: workloadPath(t.workload),
		Expires: s.GetExpireTime().AsTime(), HttpOnly: true, Secure: p.cfg.Secure, SameSite: http.SameSiteStrictMode})
	u := *r.URL
	q := u.Query()
	q.Del("ticket")
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
}

// bearer is the request's bearer token, if any.
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// outgoing is the context of a call to the workload service with the
// caller's credential and address.
func outgoing(r *http.Request, cred string) context.Context {
	md := metadata.MD{}
	if cred != "" {
		md.Set("authorization", "Bearer "+cred)
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		md.Set("x-forwarded-for", host)
	}
	return metadata.NewOutgoingContext(r.Context(), md)
}

// refuse answers a refusal of the workload service's as HTTP.
func refuse(w http.ResponseWriter, err error) {
	st, _ := status.FromError(err)
	code := http.StatusBadGateway
	switch st.Code() {
	case codes.Unauthenticated:
		w.Header().Set("WWW-Authenticate", `Bearer realm="runway"`)
		code = http.StatusUnauthorized
	case codes.PermissionDenied:
		code = http.StatusForbidden
	case codes.NotFound, codes.InvalidArgument:
		code = http.StatusNotFound
	case codes.FailedPrecondition, codes.Unavailable, codes.ResourceExhausted:
		code = http.StatusServiceUnavailable
	}
	http.Error(w, st.Message(), code)
}

func upgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

type toKey struct{}

type resolved struct {
	t  target
	to *workloadv1.ToolTarget
}

// rewrite makes the request the pod gets: to the tool's address, under its
// path, without the caller's credential.
func rewrite(pr *httputil.ProxyRequest) {
	res := pr.In.Context().Value(toKey{}).(resolved)
	out := pr.Out
	out.URL.Scheme, out.URL.Host = "http", res.to.GetAddress()
	if res.to.GetBaseUrl() {
		out.URL.Path, out.URL.RawPath = pr.In.URL.Path, pr.In.URL.RawPath
	} else {
		prefix := strings.TrimSuffix(res.to.GetPathPrefix(), "/")
		out.URL.Path, out.URL.RawPath = prefix+res.t.rest, ""
	}
	out.Host = pr.In.Host // the browser's: tools compare it with Origin
	out.Header.Del("Authorization")
	stripOwnCookie(out.Header)
	pr.SetXForwarded()
	out.Header.Set("X-Forwarded-Prefix", res.t.prefix())
}

// stripOwnCookie removes the proxy's cookie from the Cookie headers, keeping
// the tool's own.
func stripOwnCookie(h http.Header) {
	var keep []string
	for _, line := range h.Values("Cookie") {
		for _, c := range strings.Split(line, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(c), "=")
			if name != CookieName && strings.TrimSpace(c) != "" {
				keep = append(keep, strings.TrimSpace(c))
			}
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}

// dropOwnCookie removes a pod's Set-Cookie of the proxy's cookie: a tool
// cannot set or clear its users' sessions.
func dropOwnCookie(resp *http.Response) error {
	cookies := resp.Header.Values("Set-Cookie")
	resp.Header.Del("Set-Cookie")
	for _, c := range cookies {
		name, _, _ := strings.Cut(strings.TrimSpace(c), "=")
		if !strings.EqualFold(strings.TrimSpace(name), CookieName) {
			resp.Header.Add("Set-Cookie", c)
		}
	}
	return nil
}

// URL is the proxy's base URL for a listener address.
func URL(addr string, secure bool) string {
	u := url.URL{Scheme: "http", Host: addr}
	if secure {
		u.Scheme = "https"
	}
	return u.String()
}
