// Package server is the composition of Runway's control plane: it builds
// the services (services/quota, workload, scheduler, nodemanager) on
// pkg/grpcserver, alone (Serve, for `runway serve <svc>`) or all on one
// listener with an embedded etcd and in-process node agents (RunDev, for
// `runway dev`), and runs node agents (RunAgent, for `runway agent`).
//
// The cobra commands in cmd/runway only parse flags and call in here, so
// the end-to-end test (dev_test.go) runs the very composition the binary
// runs.
//
// Every server runs pkg/auth's guard in its interceptor slot: each call is
// authenticated and authorised from the role table, and mutating calls are
// audited. Services calling each other (workload → quota) present a service
// token signed with the same keys (newGuard, dialService).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/blob"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/history"
	"github.com/runwayhq/runway/pkg/metrics"
	"github.com/runwayhq/runway/pkg/sealing"
	"github.com/runwayhq/runway/pkg/webui"
	"github.com/runwayhq/runway/services/identity"
	metricssvc "github.com/runwayhq/runway/services/metrics"
	"github.com/runwayhq/runway/services/nodemanager"
	"github.com/runwayhq/runway/services/quota"
	"github.com/runwayhq/runway/services/scheduler"
	"github.com/runwayhq/runway/services/workload"
)

// Service names accepted by Serve (and `runway serve`).
const (
	Quota       = "quota"
	Workload    = "workload"
	Scheduler   = "scheduler"
	NodeManager = "nodemanager"
	Identity    = "identity"
	Metrics     = "metrics"
)

// Services lists the service names in the order they are built.
var Services = []string{Identity, Quota, Workload, Scheduler, NodeManager, Metrics}

// DefaultOpenAPIPath is where the generated OpenAPI document lives in a
// checkout; the commands read it from there (relative to the working
// directory) unless --openapi says otherwise.
const DefaultOpenAPIPath = "gen/openapi/runway.swagger.json"

// DefaultShutdownTimeout bounds the graceful part of the server's shutdown.
// Watches (WatchWorkloads) never finish on their own, so a long timeout only
// delays the exit.
const DefaultShutdownTimeout = 2 * time.Second

// LoadOpenAPI reads the OpenAPI document served as GET /openapi.json. The
// document is generated into gen/openapi/ (which go:embed cannot reach from
// here), so it is read at startup: a missing file at the default path is not
// an error (the server answers 404 for /openapi.json); a missing file that
// was asked for explicitly is.
func LoadOpenAPI(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && path == DefaultOpenAPIPath {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	return b, nil
}

// service is what every Runway service offers pkg/grpcserver.
type service interface {
	Register(g *grpc.Server)
	RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error
}

// built is one service and its loop: the scheduler's replica loop, the
// workload service's status controller.
type built struct {
	name string
	svc  service
	run  func(ctx context.Context) error // nil when the service has no loop
}

// buildDeps are what building the services needs.
type buildDeps struct {
	etcd      *clientv3.Client
	quotaConn *grpc.ClientConn // where the workload service asks about projects
	agentTLS  *tls.Config      // the workload service's TLS to the node agents (nil: plaintext)
	replica   string           // the scheduler's election name
	logger    *slog.Logger
	scheduler scheduler.Config // tuning (tests); Replica and Logger are set here
	examples  bool             // the workload service creates the quick start's example assets
	guard     *auth.Guard
	identity  identity.Config
	history   history.Source // where the metrics service reads
	// historyInterval is the history's sampling interval; blobs keeps the
	// reports' CSVs.
	historyInterval time.Duration
	blobs           blob.Store
	metrics         prometheus.Registerer // where the services' metrics go (nil: nowhere)
	// nodeKeys gives the Kubernetes node agents their nodes' mark keys
	// (the NodeManagerService with the Kubernetes runtime; nil: none).
	nodeKeys nodemanager.NodeKeys
	// credentialKeys seal and open credentials (nil: none can be made).
	credentialKeys *sealing.Ring
	// notifications bounds the workload service's notifications.
	notifications workload.NotificationConfig
	// proxyURL is the tool proxy's base URL ("": none serves).
	proxyURL string
}

// build builds one service by name.
func build(name string, d buildDeps) (built, error) {
	switch name {
	case Identity:
		s, err := identity.New(d.identity, identity.Deps{Client: d.etcd, Guard: d.guard, Logger: d.logger})
		return built{name: name, svc: s}, err
	case Quota:
		s, err := quota.New(quota.Config{}, quota.Deps{Client: d.etcd, Logger: d.logger})
		return built{name: name, svc: s}, err
	case Workload:
		if d.quotaConn == nil {
			return built{}, errors.New("the workload service needs the quota service's address")
		}
		deps := workload.Deps{Client: d.etcd, Logger: d.logger, ToolTokens: d.guard, Endpoints: d.guard,
			Projects:         workload.NewStoredProjects(d.etcd, workload.QuotaProjects{Client: quotav1.NewQuotaServiceClient(d.quotaConn)}),
			AgentCredentials: d.guard.ServiceCredentials(Workload), AgentTLS: d.agentTLS, CredentialKeys: d.credentialKeys,
			Guard: d.guard}
		s, err := workload.New(workload.Config{Examples: d.examples, Notifications: d.notifications, ProxyURL: d.proxyURL}, deps)
		if err != nil {
			return built{}, err
		}
		// The status controller folds the scheduler's bindings and
		// evictions and the agents' run reports into each workload's status;
		// it runs beside the service (replicas' writes are conditional and
		// idempotent).
		c, err := workload.NewController(deps, workload.WithRegisterer(d.metrics))
		if err != nil {
			return built{}, err
		}
		// The notification dispatcher beside it: replicas record each
		// delivery once and claim it before sending.
		dispatch := s.Dispatcher()
		if dispatch == nil {
			return built{name: name, svc: s, run: c.Run}, nil
		}
		return built{name: name, svc: s, run: func(ctx context.Context) error {
			g := newGroup(ctx)
			g.Go("workload status controller", c.Run)
			g.Go("notification dispatcher", dispatch.Run)
			return g.Wait()
		}}, nil
	case Scheduler:
		cfg := d.scheduler
		cfg.Replica, cfg.Logger = d.replica, d.logger
		s, err := scheduler.New(cfg, scheduler.Deps{Client: d.etcd})
		if err != nil {
			return built{}, err
		}
		return built{name: name, svc: s, run: s.Run}, nil
	case NodeManager:
		s, err := nodemanager.New(nodemanager.Deps{Client: d.etcd, Logger: d.logger, NodeKeys: d.nodeKeys, AgentTokens: d.guard})
		return built{name: name, svc: s}, err
	case Metrics:
		if d.history == nil || d.blobs == nil {
			return built{}, errors.New("the metrics service needs a metrics history (--prometheus-url) and a blob store (--blob-s3-endpoint or --blob-dir)")
		}
		m, err := metricssvc.New(metricssvc.Deps{Source: d.history, Interval: d.historyInterval})
		if err != nil {
			return built{}, err
		}
		r, err := metricssvc.NewReports(metricssvc.ReportDeps{Client: d.etcd, Blobs: d.blobs, Source: d.history,
			Guard: d.guard, Interval: d.historyInterval, Logger: d.logger})
		if err != nil {
			return built{}, err
		}
		s := metricssvc.Service{Metrics: m, Reports: r}
		return built{name: name, svc: s, run: s.Run}, nil
	}
	return built{}, fmt.Errorf("unknown service %q (want one of %s)", name, strings.Join(Services, ", "))
}

// EtcdTLS are the files of a TLS connection to etcd; all empty for
// plaintext.
type EtcdTLS struct {
	// CAFile verifies etcd's certificate; CertFile and KeyFile are this
	// client's (etcd's --client-cert-auth).
	CAFile, CertFile, KeyFile string
}

// newEtcdClient connects to endpoints ("host:port" or URLs), over TLS when
// tls names any file.
func newEtcdClient(endpoints []string, tlsFiles ...EtcdTLS) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no etcd endpoints")
	}
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if len(tlsFiles) == 1 && tlsFiles[0] != (EtcdTLS{}) {
		f := tlsFiles[0]
		tc, err := transport.TLSInfo{TrustedCAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile}.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd TLS: %w", err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %s: %w", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

// EnsureAgentEtcdRole makes etcd's role of the node agents and grants it
// to user (etcdstore.EnsureAgentRole), as etcd's root at endpoints.
func EnsureAgentEtcdRole(ctx context.Context, endpoints []string, tls EtcdTLS, user string) error {
	cli, err := newEtcdClient(endpoints, tls)
	if err != nil {
		return err
	}
	defer cli.Close()
	return etcdstore.EnsureAgentRole(ctx, cli, user)
}

// dialService is a gRPC connection from the service named caller to a
// Runway server, carrying a service token: over TLS when tc is set (the
// other service's certificate checked against tc's roots, tc's certificate
// presented for mutual TLS), else plaintext. reg, when set, counts its calls.
func dialService(addr, caller string, guard *auth.Guard, reg *metrics.Registry, tc *tls.Config) (*grpc.ClientConn, error) {
	return dialServiceAs(addr, guard.ServiceCredentials(caller), reg, tc)
}

// dialServiceAs is dialService sending creds.
func dialServiceAs(addr string, creds credentials.PerRPCCredentials, reg *metrics.Registry, tc *tls.Config) (*grpc.ClientConn, error) {
	var opts []grpc.DialOption
	if reg != nil {
		opts = reg.DialOptions()
	}
	transport := insecure.NewCredentials()
	if tc != nil {
		transport = credentials.NewTLS(tc)
	}
	return dialWith(addr, transport, creds, opts...)
}

// dialAs is a plaintext gRPC connection to a Runway server sending creds.
func dialAs(addr string, creds credentials.PerRPCCredentials) (*grpc.ClientConn, error) {
	return dialWith(addr, insecure.NewCredentials(), creds)
}

func dialWith(addr string, transport credentials.TransportCredentials, creds credentials.PerRPCCredentials, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(transport), grpc.WithPerRPCCredentials(creds)}, opts...)
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	return conn, nil
}

// newGuard loads the guard of one server (it reads etcd), and the server
// config that installs it.
func newGuard(ctx context.Context, cli *clientv3.Client, logger *slog.Logger, cfg auth.Config) (*auth.Guard, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	g, err := auth.New(ctx, cfg, auth.Deps{Client: cli, Logger: logger})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// serverConfig is the grpcserver config every composition uses: the web UI
// at /, and reg counting the calls (its series are served on the operations
// listener, not here).
func serverConfig(listen string, logger *slog.Logger, openAPI []byte, g *auth.Guard, reg *metrics.Registry) grpcserver.Config {
	return grpcserver.Config{Listen: listen, Logger: logger, OpenAPI: openAPI, UI: webui.Handler(), ShutdownTimeout: DefaultShutdownTimeout,
		Auth: g.UnaryInterceptor, AuthStream: g.StreamInterceptor, ServerOptions: reg.ServerOptions()}
}

// group runs functions until the first returns or ctx ends, then cancels
// the rest and waits for all of them.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	errs   chan error
	n      int
}

func newGroup(ctx context.Context) *group {
	ctx, cancel := context.WithCancel(ctx)
	return &group{ctx: ctx, cancel: cancel, errs: make(chan error, 64)}
}

func (g *group) Go(name string, f func(ctx context.Context) error) {
	g.n++
	go func() {
		err := f(g.ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%s: %w", name, err)
		} else if err != nil || g.ctx.Err() != nil {
			err = nil
		} else {
			err = fmt.Errorf("%s stopped", name)
		}
		g.errs <- err
	}()
}

// Wait waits until ctx ends or one function returns, then stops the others
// and returns the first error.
func (g *group) Wait() error {
	var first error
	if g.n > 0 {
		select {
		case <-g.ctx.Done():
		case first = <-g.errs:
			g.n--
		}
	}
	g.cancel()
	for ; g.n > 0; g.n-- {
		if err := <-g.errs; first == nil {
			first = err
		}
	}
	return first
}
