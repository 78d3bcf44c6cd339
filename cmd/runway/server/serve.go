package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/runwayhq/runway/pkg/grpcserver"
)

// ServeConfig is one service on its own server (`runway serve <svc>`).
type ServeConfig struct {
	// Service is one of Services. Required.
	Service string
	// EtcdEndpoints are the etcd client endpoints. Required.
	EtcdEndpoints []string
	// EtcdTLS, when set, connects to etcd over TLS.
	EtcdTLS EtcdTLS
	// Listen is the gRPC+REST address, e.g. "0.0.0.0:7070". Required.
	Listen string
	// QuotaServer is the QuotaService's address; required by the workload
	// service, which asks it whether a project exists.
	QuotaServer string
	// Replica names a scheduler replica in the election; the host name
	// when empty.
	Replica string
	// Runtime is where the scheduler's bound pods run: RuntimeLocal (node
	// agents; the default) or RuntimeKubernetes (Kube, run by the leader).
	Runtime string
	// Kube configures RuntimeKubernetes.
	Kube KubeConfig
	// WorkloadServer is the WorkloadService's address; RuntimeKubernetes
	// creates the workloads of users' pods there.
	WorkloadServer string
	// OpenAPI is served as GET /openapi.json (LoadOpenAPI).
	OpenAPI []byte
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Ready, when set, is called with the listening address once the
	// service is built and about to serve.
	Ready func(addr string)
}

// Serve builds one service and serves it until ctx ends (the scheduler
// also runs its replica loop), then shuts down and returns nil; it returns
// an error if the service cannot be built or stops on its own.
func Serve(ctx context.Context, cfg ServeConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Listen == "" {
		return errors.New("--listen is required")
	}
	if cfg.Service == Workload && cfg.QuotaServer == "" {
		return errors.New("the workload service needs --quota-server (the QuotaService's address)")
	}
	cli, err := newEtcdClient(cfg.EtcdEndpoints, cfg.EtcdTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	d := buildDeps{etcd: cli, replica: cfg.Replica, logger: cfg.Logger}
	if cfg.QuotaServer != "" && cfg.Service == Workload {
		conn, err := dial(cfg.QuotaServer)
		if err != nil {
			return err
		}
		defer conn.Close()
		d.quotaConn = conn
	}
	switch {
	case cfg.Runtime == RuntimeKubernetes && cfg.Service != Scheduler:
		return errors.New("--runtime kubernetes is the scheduler's (it runs on the leader)")
	case cfg.Runtime == RuntimeKubernetes && cfg.WorkloadServer == "":
		return errors.New("--runtime kubernetes needs --workload-server (users' pods become workloads there)")
	case cfg.Runtime == RuntimeKubernetes:
		conn, err := dial(cfg.WorkloadServer)
		if err != nil {
			return err
		}
		defer conn.Close()
		if d.scheduler.WhileLeading, err = kubeRuntime(cfg.Kube, cli, conn, cfg.Logger); err != nil {
			return err
		}
	case cfg.Runtime != "" && cfg.Runtime != RuntimeLocal:
		return fmt.Errorf("--runtime %q: want %s or %s", cfg.Runtime, RuntimeLocal, RuntimeKubernetes)
	}
	b, err := build(cfg.Service, d)
	if err != nil {
		return err
	}
	srv, err := grpcserver.New(grpcserver.Config{Listen: cfg.Listen, Logger: cfg.Logger, OpenAPI: cfg.OpenAPI,
		ShutdownTimeout: DefaultShutdownTimeout})
	if err != nil {
		return err
	}
	srv.Register(b.svc.Register)
	srv.RegisterGateway(b.svc.RegisterGateway)
	g := newGroup(ctx)
	g.Go("server", srv.Serve)
	if b.run != nil {
		g.Go(b.name, b.run)
	}
	if cfg.Ready != nil {
		cfg.Ready(srv.Addr())
	}
	return g.Wait()
}
