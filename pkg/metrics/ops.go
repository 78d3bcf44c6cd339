package metrics

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/runwayhq/runway/pkg/loopback"
)

// OpsConfig is the operations listener: GET /metrics and any extra routes
// (the embedded store's query API).
type OpsConfig struct {
	// Listen is the address; a port of 0 picks a free one. Required.
	Listen string
	// Token, when set, is the bearer token every request must carry
	// ("Authorization: Bearer TOKEN"). An address that is not loopback
	// needs one: the series name projects, workloads and nodes.
	Token string
	// TLS, when set, serves the listener over TLS only (and mutual TLS
	// when it requires client certificates): the series and the history's
	// query API are as sensitive as the API's answers, so a server whose
	// API has TLS gives its operations listener the same.
	TLS *tls.Config
	// Gatherer is served as GET /metrics.
	Gatherer prometheus.Gatherer
	// Routes are more handlers on the same mux, by pattern.
	Routes map[string]http.Handler
	Logger *slog.Logger
}

// Ops is a bound operations listener; Serve runs it.
type Ops struct {
	lis    net.Listener
	http   *http.Server
	log    *slog.Logger
	scheme string
}

// Listen checks cfg and binds its address at once, so Addr is known
// before Serve.
func Listen(cfg OpsConfig) (*Ops, error) {
	if cfg.Listen == "" || cfg.Gatherer == nil {
		return nil, errors.New("metrics: the operations listener needs an address and a gatherer")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Token == "" && !Loopback(cfg.Listen) {
		return nil, fmt.Errorf("--metrics-listen %s is not a loopback address: give --metrics-token-file too", cfg.Listen)
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	scheme := "http"
	if cfg.TLS != nil {
		lis, scheme = tls.NewListener(lis, cfg.TLS.Clone()), "https"
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{MaxRequestsInFlight: 4}))
	for pattern, h := range cfg.Routes {
		mux.Handle(pattern, h)
	}
	var h http.Handler = mux
	if cfg.Token != "" {
		h = bearer(cfg.Token, mux)
	}
	return &Ops{lis: lis, log: cfg.Logger, scheme: scheme, http: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}}, nil
}

// Addr is the bound address.
func (o *Ops) Addr() string { return o.lis.Addr().String() }

// URL is the listener's base URL: https:// when it serves TLS.
func (o *Ops) URL() string { return o.scheme + "://" + o.Addr() }

// Serve serves until ctx ends.
func (o *Ops) Serve(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- o.http.Serve(o.lis) }()
	o.log.Info("operations listener", "url", o.URL()+"/metrics")
	select {
	case err := <-served:
		return fmt.Errorf("metrics: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = o.http.Shutdown(sctx)
	<-served
	return nil
}

// Close releases a listener that will not be served.
func (o *Ops) Close() error { return o.lis.Close() }

// Loopback reports whether addr's host is a loopback address or localhost;
// an empty or wildcard host is not. (runway dev holds its API listener to
// the same test.)
func Loopback(addr string) bool { return loopback.Addr(addr) }

func bearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="runway-operations"`)
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
