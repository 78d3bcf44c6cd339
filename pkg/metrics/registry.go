package metrics

import (
	"fmt"
	"io"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"google.golang.org/grpc"
)

// Registry is one process's metrics.
type Registry struct {
	*prometheus.Registry
	server *grpcprom.ServerMetrics
	client *grpcprom.ClientMetrics
}

// NewRegistry registers the Go, process and gRPC collectors on a new
// registry.
func NewRegistry() (*Registry, error) {
	r := &Registry{Registry: prometheus.NewRegistry(),
		server: grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram()),
		client: grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram())}
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), r.server, r.client} {
		if err := r.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return r, nil
}

// ServerOptions install the gRPC server metrics; pass them as
// grpcserver.Config.ServerOptions (they run inside its chain, after the
// error mapping, so the code counted is the one the caller gets).
func (r *Registry) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(r.server.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(r.server.StreamServerInterceptor())}
}

// InitializeServer creates the series of every method of g at zero, so a
// method never called still shows (call it after the services registered).
func (r *Registry) InitializeServer(g *grpc.Server) { r.server.InitializeMetrics(g) }

// DialOptions install the gRPC client metrics on a connection.
func (r *Registry) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(r.client.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(r.client.StreamClientInterceptor())}
}

// RegisterAll registers collectors, failing on the first that clashes.
func (r *Registry) RegisterAll(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	return nil
}

// Lint gathers g and runs promlint (what `promtool check metrics` runs) on
// it: the problems with Prometheus's naming and help conventions.
func Lint(g prometheus.Gatherer) ([]promlint.Problem, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("metrics: gather: %w", err)
	}
	return promlint.NewWithMetricFamilies(mfs).Lint()
}

// Problem is one promlint finding.
type Problem = promlint.Problem

// LintText runs promlint on an exposition in the text format (a scrape).
func LintText(r io.Reader) ([]Problem, error) { return promlint.New(r).Lint() }
