package grpcserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

// DefaultShutdownTimeout is how long calls in flight may run on after
// Serve's context is done, unless Config.ShutdownTimeout says otherwise.
const DefaultShutdownTimeout = 10 * time.Second

// DefaultMaxMessageBytes is the largest request when Config.MaxMessageBytes
// is 0: more than any request of the API needs, and under etcd's largest
// write, so a request that fits is never refused by the store for its size.
const DefaultMaxMessageBytes = 1 << 20

// DefaultBodyTimeout is how long a REST client may take to send its body
// when Config.BodyTimeout is 0: a 1 MiB body at well under 100 KiB/s.
const DefaultBodyTimeout = 30 * time.Second

// idleTimeout closes a keep-alive connection without requests, so idle
// clients do not hold connections (and their goroutines) for ever.
const idleTimeout = 2 * time.Minute

// Config is what a service (or `runway dev`) decides about its server.
type Config struct {
	// Listen is the one address for gRPC and REST, such as "127.0.0.1:7070".
	// A port of 0 picks a free one; Addr tells which. Required.
	Listen string
	// Logger gets the access log, panics and the causes of Internal errors;
	// slog.Default() when nil.
	Logger *slog.Logger
	// Auth is the authentication/authorisation slot for unary calls
	// (pkg/auth); nil skips it. It runs after the request id is set, so
	// RequestID(ctx) works inside it.
	Auth grpc.UnaryServerInterceptor
	// AuthStream is the same slot for streaming calls; nil skips it.
	AuthStream grpc.StreamServerInterceptor
	// OpenAPI is served as GET /openapi.json (gen/openapi/runway.swagger.json);
	// empty gives 404.
	OpenAPI []byte
	// Metrics, when set, is served as GET /metrics (Prometheus).
	Metrics http.Handler
	// UI, when set, serves every path outside /v1/ that the server does not
	// own itself (pkg/webui); the REST paths are never shadowed.
	UI http.Handler
	// Domains maps a full service name ("runway.quota.v1.QuotaService") to
	// the API domain in its ErrorInfo. A service not listed gets
	// DomainOf(service).
	Domains map[string]string
	// TLS, when set, serves gRPC and REST over TLS only (a plaintext client
	// fails the handshake); with ClientAuth set to RequireAndVerifyClientCert
	// it is mutual TLS. The gateway's loopback connection trusts exactly the
	// server's own certificate and presents it as its client certificate
	// (so for mutual TLS it must allow client authentication). Nil serves
	// plaintext, for loopback (`runway dev`).
	TLS *tls.Config
	// TrustedProxies are the proxies (load balancers) whose X-Forwarded-For
	// is believed, hop by hop from the right; a client's own is ignored.
	TrustedProxies []netip.Prefix
	// MaxMessageBytes bounds one request: a gRPC message (larger ones are
	// refused with RESOURCE_EXHAUSTED naming the limit before they are read)
	// and a REST body (413). 0 means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// BodyTimeout bounds the time a REST client takes to send its body
	// (408 past it), so a slow client cannot hold a call open; 0 means
	// DefaultBodyTimeout. The headers have 10 s.
	BodyTimeout time.Duration
	// ShutdownTimeout bounds the graceful part of shutdown; 0 means
	// DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// ServerOptions are passed on to grpc.NewServer after the chain's own.
	// Interceptors given with grpc.ChainUnaryInterceptor here run inside the
	// chain, after the apierr mapping, so their errors are mapped too (the
	// place for request validation). Do not use grpc.UnaryInterceptor: grpc
	// puts that one outermost, before recover.
	ServerOptions []grpc.ServerOption
}

// GatewayFunc registers REST handlers on the gateway mux, forwarding to the
// given loopback connection; the generated Register<Svc>Handler functions
// have this shape.
type GatewayFunc func(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error

// Server is one listener serving gRPC, REST, health, reflection and OpenAPI.
// Build it with New, add services with Register and RegisterGateway, then
// Serve.
type Server struct {
	cfg    Config
	log    *slog.Logger
	lis    net.Listener
	grpc   *grpc.Server
	health *health.Server
	gwMux  *runtime.ServeMux
	http   *http.Server

	mu       sync.Mutex
	started  bool
	gateways []GatewayFunc

	draining      atomic.Bool
	gatewaySecret string // tags the address the gateway passes on (peer.go)
}

// New listens on cfg.Listen at once (so Addr is known before Serve) and
// builds the gRPC server with its interceptor chain, health and reflection.
// Call Serve, or Close if the server is abandoned before serving.
func New(cfg Config) (*Server, error) {
	if cfg.Listen == "" {
		return nil, errors.New("grpcserver: Config.Listen is empty")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("grpcserver: listen: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, lis: lis, health: health.NewServer(), gatewaySecret: newGatewaySecret()}

	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxMessageBytes),
		grpc.ChainUnaryInterceptor(s.unaryChain()...),
		grpc.ChainStreamInterceptor(s.streamChain()...),
	}
	s.grpc = grpc.NewServer(append(opts, cfg.ServerOptions...)...)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc) // grpc.reflection.v1 and v1alpha

	s.gwMux = newGatewayMux(runtime.WithMetadata(s.gatewayPeer))
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	if cfg.TLS != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	s.http = &http.Server{
		Handler:           s.routes(),
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		TLSConfig:         cfg.TLS,
	}
	return s, nil
}

// Addr is the address the server listens on, with the real port when
// Config.Listen asked for port 0.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Register lets a service register itself on the gRPC server, for example
// func(g *grpc.Server) { quotav1.RegisterQuotaServiceServer(g, svc) }.
// Call it before Serve; it panics afterwards, as grpc does.
func (s *Server) Register(register func(*grpc.Server)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		panic("grpcserver: Register called after Serve")
	}
	register(s.grpc)
}

// RegisterGateway adds REST handlers, such as quotav1.RegisterQuotaServiceHandler.
// They are registered when Serve starts, over a loopback connection to this
// same server, so REST calls run the whole interceptor chain. Call it before
// Serve; it panics afterwards.
func (s *Server) RegisterGateway(register GatewayFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		panic("grpcserver: RegisterGateway called after Serve")
	}
	s.gateways = append(s.gateways, register)
}

// SetServing sets the health status of one service (full name) or, with "",
// of the whole server. Serve marks every registered service SERVING when it
// starts and NOT_SERVING when it stops; a service uses this in between, for
// example while it cannot reach its store.
func (s *Server) SetServing(service string, serving bool) {
	st := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		st = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus(service, st)
}

// Serve serves until ctx is done, then shuts down gracefully (see the
// package comment) and returns nil. It returns an error if the gateway
// cannot be set up or the listener fails. Serve may be called once.
func (s *Server) Serve(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("grpcserver: Serve called twice, or after Close")
	}
	s.started = true
	gateways := s.gateways
	s.mu.Unlock()

	creds, err := s.loopbackCredentials()
	if err != nil {
		s.stopNow()
		return err
	}
	conn, err := grpc.NewClient(loopbackTarget(s.lis.Addr()), grpc.WithTransportCredentials(creds))
	if err != nil {
		s.stopNow()
		return fmt.Errorf("grpcserver: loopback connection: %w", err)
	}
	defer conn.Close()
	for _, register := range gateways {
		if err := register(ctx, s.gwMux, conn); err != nil {
			s.stopNow()
			return fmt.Errorf("grpcserver: register gateway: %w", err)
		}
	}
	for name := range s.grpc.GetServiceInfo() {
		s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)

	served := make(chan error, 1)
	go func() {
		if s.cfg.TLS != nil {
			served <- s.http.ServeTLS(s.lis, "", "")
			return
		}
		served <- s.http.Serve(s.lis)
	}()
	s.log.Info("serving gRPC and HTTP", "addr", s.Addr(), "tls", s.cfg.TLS != nil)
	select {
	case err := <-served: // the listener failed
		s.stopNow()
		return fmt.Errorf("grpcserver: serve: %w", err)
	case <-ctx.Done():
	}
	s.shutdown()
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("grpcserver: serve: %w", err)
	}
	return nil
}

// Close releases a server that will not be served (its listener and gRPC
// server). A server that is serving stops when Serve's context is done
// instead; Close then does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return nil
	}
	s.started = true
	s.stopNow()
	return nil
}

// shutdown is the graceful stop: refuse new work, let calls in flight finish
// within ShutdownTimeout, then cancel the rest.
func (s *Server) shutdown() {
	s.draining.Store(true)
	s.health.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.http.Shutdown(ctx); err != nil {
		s.log.Warn("calls still running at the shutdown timeout are cancelled",
			"timeout", s.cfg.ShutdownTimeout.String())
		s.grpc.Stop() // cancels the gRPC calls still in flight
		_ = s.http.Close()
		return
	}
	s.grpc.Stop() // nothing is left in flight; releases the server
}

// stopNow stops everything at once, for the error paths.
func (s *Server) stopNow() {
	s.draining.Store(true)
	s.health.Shutdown()
	_ = s.http.Close()
	_ = s.lis.Close()
	s.grpc.Stop()
}

// loopbackCredentials are the gateway's: plaintext for a plaintext server;
// for TLS, trust in exactly the server's own certificate (pinned, whatever
// names it carries), which it also presents for mutual TLS.
func (s *Server) loopbackCredentials() (credentials.TransportCredentials, error) {
	if s.cfg.TLS == nil {
		return insecure.NewCredentials(), nil
	}
	if len(s.cfg.TLS.Certificates) == 0 {
		return nil, errors.New("grpcserver: Config.TLS has no certificate")
	}
	own := s.cfg.TLS.Certificates[0]
	return credentials.NewTLS(&tls.Config{
		MinVersion:         tls.VersionTLS12,
		Certificates:       []tls.Certificate{own},
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || !bytes.Equal(raw[0], own.Certificate[0]) {
				return errors.New("grpcserver: the loopback peer is not this server")
			}
			return nil
		},
	}), nil
}

// loopbackTarget is the address the gateway dials: the listener's, with a
// wildcard host replaced by 127.0.0.1 (a wildcard listener accepts it).
func loopbackTarget(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "passthrough:///" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "passthrough:///" + net.JoinHostPort(host, port)
}
