package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"

	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/pkg/gpumetrics"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/services/nodemanager/agent"
	"github.com/runwayhq/runway/services/scheduler"
)

// DevConfig is the single-process control plane (`runway dev`).
type DevConfig struct {
	// DataDir keeps etcd's data (DataDir/etcd), the agents' pods
	// (DataDir/nodes/NAME) and the env file (DataDir/env). Starting again on
	// the same DataDir resumes. Required.
	DataDir string
	// Listen is the one gRPC+REST address of all the services;
	// "127.0.0.1:0" picks a free port.
	Listen string
	// Nodes is the number of in-process node agents, node-1..node-N, each
	// with GPUsPerNode simulated GPUs.
	Nodes, GPUsPerNode int
	// OpenAPI is served as GET /openapi.json (LoadOpenAPI).
	OpenAPI []byte
	// TimeSlicing, when set ("off", "strict" or "fair"), is written as the
	// default node pool's time-slicing mode once the server serves.
	TimeSlicing string
	// Logger; slog.Default() when nil.
	Logger *slog.Logger

	// Kube, when set, runs the Kubernetes runtime on the scheduler (beside
	// any Nodes agents).
	Kube *KubeConfig

	// For tests: extra embedded-etcd options (etcdtest.WithTestSpeedups),
	// the scheduler's tuning and the agents' lease TTL and stop grace.
	EtcdOptions []etcdtest.Option
	Scheduler   scheduler.Config
	LeaseTTL    time.Duration
	StopGrace   time.Duration
}

// EnvLine is the line `runway dev` prints and writes to DataDir/env.
func EnvLine(addr string) string { return "export RUNWAY_SERVER=" + addr }

// RunDev starts an embedded etcd, every service on one server, the
// scheduler's replica loop (it elects itself), the workload status
// controller and the node agents, writes
// DataDir/env, calls ready with the server's address, and runs until ctx
// ends. It then stops the agents, the scheduler and the server, closes etcd
// and returns nil; it returns an error if a part cannot start or stops on
// its own.
func RunDev(ctx context.Context, cfg DevConfig, ready func(addr string)) (err error) {
	if cfg.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:7070"
	}
	if cfg.Nodes < 0 || cfg.GPUsPerNode < 0 {
		return errors.New("--nodes and --gpus-per-node must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	etcdDir := filepath.Join(cfg.DataDir, "etcd")
	if err := os.MkdirAll(etcdDir, 0o700); err != nil {
		return err
	}
	// etcd's own log is silenced: it reports a clean stop as errors. A
	// failure to start still comes back from StartEmbedded.
	opts := append([]etcdtest.Option{etcdtest.WithLogger(zap.NewNop())}, cfg.EtcdOptions...)
	e, err := etcdtest.StartEmbedded(etcdDir, "http://127.0.0.1:0", opts...)
	if err != nil {
		return err
	}
	defer e.Close() // last: everything below uses it
	cli, err := newEtcdClient([]string{e.Clients[0].Addr().String()})
	if err != nil {
		return err
	}
	defer cli.Close() // before e.Close: open watches would make it wait

	mode, err := timeSlicingMode(cfg.TimeSlicing)
	if err != nil {
		return err
	}
	// The agents' GPU series, served on the server's own /metrics.
	reg := prometheus.NewRegistry()
	metrics, err := gpumetrics.NewMetrics(reg)
	if err != nil {
		return err
	}
	srv, err := grpcserver.New(grpcserver.Config{Listen: cfg.Listen, Logger: cfg.Logger, OpenAPI: cfg.OpenAPI,
		ShutdownTimeout: DefaultShutdownTimeout, Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	if err != nil {
		return err
	}
	// The workload service asks the QuotaService about projects over a
	// loopback connection to this same server (grpc.NewClient connects
	// lazily, so the server need not serve yet).
	loop, err := dial(srv.Addr())
	if err != nil {
		_ = srv.Close()
		return err
	}
	defer loop.Close()
	d := buildDeps{etcd: cli, quotaConn: loop, replica: "dev", logger: cfg.Logger, scheduler: cfg.Scheduler, examples: true}
	if cfg.Kube != nil {
		if d.scheduler.WhileLeading, err = kubeRuntime(*cfg.Kube, cli, loop, cfg.Logger); err != nil {
			_ = srv.Close()
			return err
		}
	}
	var runs []built
	for _, name := range Services {
		b, err := build(name, d)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("%s: %w", name, err)
		}
		srv.Register(b.svc.Register)
		srv.RegisterGateway(b.svc.RegisterGateway)
		if b.run != nil {
			runs = append(runs, b)
		}
	}
	// IdentityService: not wired yet (its own issue); grpcserver.Config.Auth
	// stays nil.

	g := newGroup(ctx)
	g.Go("server", srv.Serve)
	for _, b := range runs {
		g.Go(b.name, b.run)
	}
	for i := 1; i <= cfg.Nodes; i++ {
		node := fmt.Sprintf("node-%d", i)
		dir := filepath.Join(cfg.DataDir, "nodes", node)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			g.cancel()
			_ = g.Wait()
			return err
		}
		acfg := agent.Config{Node: node, Client: cli, DataDir: dir, Listen: "127.0.0.1:0", LeaseTTL: cfg.LeaseTTL, StopGrace: cfg.StopGrace,
			Backend: simulated.New(simulated.Config{Count: cfg.GPUsPerNode, Node: node}),
			Metrics: metrics, Logger: cfg.Logger}
		g.Go("agent "+node, func(ctx context.Context) error { return agent.Run(ctx, acfg) })
	}
	if mode != quotav1.TimeSlicingMode_TIME_SLICING_MODE_UNSPECIFIED {
		if err := setTimeSlicing(ctx, quotav1.NewQuotaServiceClient(loop), mode); err != nil {
			g.cancel()
			_ = g.Wait()
			return err
		}
	}
	line := EnvLine(srv.Addr())
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "env"), []byte(line+"\n"), 0o600); err != nil {
		g.cancel()
		_ = g.Wait()
		return err
	}
	cfg.Logger.Info("runway dev: ready", "addr", srv.Addr(), "etcd", e.Clients[0].Addr().String(),
		"nodes", cfg.Nodes, "gpusPerNode", cfg.GPUsPerNode, "dataDir", cfg.DataDir)
	if ready != nil {
		ready(srv.Addr())
	}
	return g.Wait()
}

// timeSlicingMode parses --time-slicing; "" is UNSPECIFIED (leave the
// pool as it is).
func timeSlicingMode(s string) (quotav1.TimeSlicingMode, error) {
	switch s {
	case "":
		return quotav1.TimeSlicingMode_TIME_SLICING_MODE_UNSPECIFIED, nil
	case "off":
		return quotav1.TimeSlicingMode_TIME_SLICING_MODE_OFF, nil
	case "strict":
		return quotav1.TimeSlicingMode_TIME_SLICING_MODE_STRICT, nil
	case "fair":
		return quotav1.TimeSlicingMode_TIME_SLICING_MODE_FAIR, nil
	}
	return 0, fmt.Errorf("--time-slicing %q: want off, strict or fair", s)
}

// setTimeSlicing sets the default pool's time-slicing mode through the
// QuotaService, as `runway nodepool update` would.
func setTimeSlicing(ctx context.Context, quota quotav1.QuotaServiceClient, mode quotav1.TimeSlicingMode) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := quota.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{
		NodePool:   &quotav1.NodePool{Name: "nodepools/default", TimeSlicing: &quotav1.TimeSlicing{Mode: mode}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"time_slicing.mode"}},
	}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("--time-slicing: set the default node pool: %w", err)
	}
	return nil
}
