package server

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/history"
	"github.com/runwayhq/runway/pkg/metrics"
)

// MetricsListenBeside is the default operations address of a server on
// listen: the same host on the next port (7071 beside 7070), or a free port
// when listen asks for one (so that servers started on port 0 side by side
// do not collide).
func MetricsListenBeside(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("--listen %q: %w", listen, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p >= 65535 {
		return "", fmt.Errorf("--listen %q: bad port", listen)
	}
	if p > 0 {
		p++
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// MetricsConfig is the operations listener (GET /metrics) of a server.
type MetricsConfig struct {
	// Listen is its address; none when empty. An address that is not
	// loopback needs TokenFile.
	Listen string
	// TokenFile holds the bearer token scrapers must send; empty for none.
	TokenFile string
	// TLS serves the listener over TLS only (mutual TLS with its
	// ClientCAFile). The files it leaves empty are the API listener's
	// (withAPI): a server whose API has TLS never serves its series in
	// plaintext. CAFile is not used.
	TLS ServerTLS
	// Ready, when set, is called with the bound address (tests use port 0).
	Ready func(addr string)
}

// token reads TokenFile: its first line, which must not be empty.
func (c MetricsConfig) token() (string, error) {
	if c.TokenFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return "", fmt.Errorf("--metrics-token-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", errors.New("--metrics-token-file: the file's first line is empty")
	}
	return line, nil
}

// DevMetricsTokenFile is the file in `runway dev`'s data directory that
// holds the operations listener's bearer token.
const DevMetricsTokenFile = "metrics-token"

// devMetricsToken returns DataDir/metrics-token, written with a fresh
// token on the first start and kept after (a Grafana data source set up
// once goes on working). The series name every tenant's projects and
// workloads, so the listener is not open to any local user: the file is
// the owner's alone, like DataDir/env.
func devMetricsToken(dataDir string) (string, error) {
	p := filepath.Join(dataDir, DevMetricsTokenFile)
	if err := os.Chmod(p, 0o600); err == nil {
		return p, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("metrics token: %w", err)
	}
	_, err = f.WriteString(base64.RawURLEncoding.EncodeToString(b) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(p)
		return "", fmt.Errorf("metrics token: %w", err)
	}
	return p, nil
}

// withAPI is c with the API listener's TLS files where c gives none: its
// certificate and key unless c has its own, and its client CA unless c
// names one.
func (c MetricsConfig) withAPI(api ServerTLS) MetricsConfig {
	if c.TLS.CertFile == "" && c.TLS.KeyFile == "" {
		c.TLS.CertFile, c.TLS.KeyFile = api.CertFile, api.KeyFile
	}
	if c.TLS.ClientCAFile == "" {
		c.TLS.ClientCAFile = api.ClientCAFile
	}
	return c
}

// listen binds the operations listener for reg, with more routes (the
// history's query API), or returns nil when none is configured.
func (c MetricsConfig) listen(reg *metrics.Registry, log *slog.Logger, routes map[string]http.Handler) (*metrics.Ops, error) {
	if c.Listen == "" {
		return nil, nil
	}
	token, err := c.token()
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if c.TLS.CertFile != "" || c.TLS.KeyFile != "" || c.TLS.ClientCAFile != "" {
		if tc, err = grpcserver.LoadTLS(c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ClientCAFile); err != nil {
			return nil, fmt.Errorf("--metrics-tls-cert-file: %w", err)
		}
	}
	ops, err := metrics.Listen(metrics.OpsConfig{Listen: c.Listen, Token: token, TLS: tc, Gatherer: reg, Logger: log, Routes: routes})
	if err != nil {
		return nil, err
	}
	if c.Ready != nil {
		c.Ready(ops.Addr())
	}
	return ops, nil
}

// collecting is a service with series of its own.
type collecting interface {
	Collectors() []prometheus.Collector
}

// registerCollectors registers the series of every service that has some.
func registerCollectors(reg *metrics.Registry, bs ...built) error {
	for _, b := range bs {
		if c, ok := b.svc.(collecting); ok {
			if err := reg.RegisterAll(c.Collectors()...); err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
		}
	}
	return nil
}

// HistoryConfig is `runway dev`'s embedded metrics history
// (DataDir/tsdb): its own registry gathered every Interval, kept for
// Retention, queried with PromQL on the operations listener's /api/v1/.
type HistoryConfig struct {
	// Off turns the history off.
	Off bool
	// Interval between gatherings (history.DefaultInterval when 0).
	Interval time.Duration
	// Retention (history.DefaultRetention when 0).
	Retention time.Duration
}

// open opens the history in dir, or returns nil when it is off.
func (c HistoryConfig) open(dir string, log *slog.Logger) (*history.Store, error) {
	if c.Off {
		return nil, nil
	}
	if c.Interval < 0 {
		return nil, errors.New("--history-interval must be positive")
	}
	if c.Retention < 0 {
		return nil, errors.New("--history-retention must be positive")
	}
	// Reports over long windows run for longer than an interactive query
	// should (BenchmarkReport30Days: ~30 s for 10,000 workloads).
	return history.Open(history.Config{Dir: dir, Retention: c.Retention, QueryTimeout: 2 * time.Minute, Logger: log})
}

// interval is the collection interval.
func (c HistoryConfig) interval() time.Duration {
	if c.Interval == 0 {
		return history.DefaultInterval
	}
	return c.Interval
}
