package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"

	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/blob"
	"github.com/runwayhq/runway/pkg/egress"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/gpu"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/pkg/gpumetrics"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/metrics"
	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/pkg/sealing"
	"github.com/runwayhq/runway/services/identity"
	"github.com/runwayhq/runway/services/nodemanager"
	"github.com/runwayhq/runway/services/nodemanager/agent"
	"github.com/runwayhq/runway/services/nodemanager/kube"
	"github.com/runwayhq/runway/services/scheduler"
	"github.com/runwayhq/runway/services/workload"
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
	// ProxyListen is the tool proxy's own listener (pkg/toolproxy): a
	// workload's tools at /proxy/projects/P/workloads/W/TOOL/; empty: the
	// Listen host on a free port. ProxyReady, when set, is called with its
	// address once it listens.
	ProxyListen string
	ProxyReady  func(addr string)
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
	// Out gets, on the first start only, the bootstrap administrator's
	// one-time password; nil discards it.
	Out io.Writer
	// Auth tunes tokens and the audit log (tests shorten lifetimes).
	Auth auth.Config
	// Identity configures the identity service (OIDC, bcrypt cost).
	Identity identity.Config

	// Metrics is the operations listener (GET /metrics); `runway dev`
	// puts it beside Listen (MetricsListenBeside). Without a TokenFile it
	// requires the token in DataDir/metrics-token (DevMetricsTokenFile).
	Metrics MetricsConfig
	// History is the embedded metrics history in DataDir/tsdb, queried on
	// the operations listener.
	History HistoryConfig

	// Kube, when set, runs the Kubernetes runtime on the scheduler (beside
	// any Nodes agents).
	Kube *KubeConfig

	// For tests: extra embedded-etcd options (etcdtest.WithTestSpeedups),
	// the scheduler's tuning and the agents' lease TTL and stop grace.
	EtcdOptions []etcdtest.Option
	Scheduler   scheduler.Config
	LeaseTTL    time.Duration
	StopGrace   time.Duration
	// Backend, when set, makes each agent's GPU backend (tests keep the
	// simulated backends to inject faults); GPUsPerNode simulated GPUs
	// when nil.
	Backend func(node string) gpu.Backend
	// Engine is the Docker Engine API the agents run pods on as
	// containers (ResolveRuntime); empty runs them as host processes.
	Engine string
	// Notifications bounds the notifications and says where they may go;
	// nil: the defaults, with webhooks and SMTP servers on loopback
	// allowed (a dev server's receivers are on the same machine).
	Notifications *workload.NotificationConfig
}

// DevMaxTxnOps is the embedded etcd's --max-txn-ops: the scheduler writes
// each workload's plan in one transaction, and the largest (a gang of
// workload.MaxPods pods re-placed from lost nodes: a binding delete, a
// binding put and a pod key per pod, and an event) fits in it.
const DevMaxTxnOps = 4096

// DevCompaction bounds the embedded etcd's history (etcdstore.Compactor):
// every minute, everything but the last 100,000 revisions goes. A watch or
// page token further behind gets ErrCompacted and relists, which every
// reader here does. External clusters: see pkg/etcdstore/README.md
// ("Compaction").
var DevCompaction = etcdstore.Compactor{Every: time.Minute, Keep: 100_000}

// devEtcd is what `runway dev` changes in the embedded etcd's defaults.
func devEtcd(c *embed.Config) { c.MaxTxnOps = DevMaxTxnOps }

// EnvLines are the lines `runway dev` prints and writes to DataDir/env: the
// server's address and a token of the bootstrap administrator.
func EnvLines(addr, token string) string {
	return "export RUNWAY_SERVER=" + addr + "\nexport RUNWAY_TOKEN=" + token + "\n"
}

// BootstrapLine is how the bootstrap administrator's one-time password is
// announced, once.
func BootstrapLine(password string) string {
	return "bootstrap administrator " + identity.BootstrapAdmin + " (change at first sign-in), one-time password: " + password
}

// privateDir makes dir, or makes an existing one, its owner's alone.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	return nil
}

// RunDev starts an embedded etcd, every service on one server, the
// scheduler's replica loop (it elects itself), the workload status
// controller and the node agents, creates the bootstrap administrator on the
// first start, writes DataDir/env (EnvLines), calls ready with the server's
// address and the administrator's token, and runs until ctx ends. It then stops the agents, the scheduler and the server, closes etcd
// and returns nil; it returns an error if a part cannot start or stops on
// its own.
func RunDev(ctx context.Context, cfg DevConfig, ready func(addr, token string)) (err error) {
	if cfg.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:7070"
	}
	if !metrics.Loopback(cfg.Listen) {
		return fmt.Errorf("runway dev serves plaintext, so only on loopback (127.0.0.1, ::1, localhost), not %s; use runway serve --tls-cert-file on a network", cfg.Listen)
	}
	if cfg.Nodes < 0 || cfg.GPUsPerNode < 0 {
		return errors.New("--nodes and --gpus-per-node must not be negative")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// The data directory holds the admin's token (env), etcd and every
	// tenant's series: its owner's alone, even when it was made before.
	if err := privateDir(cfg.DataDir); err != nil {
		return err
	}
	etcdDir := filepath.Join(cfg.DataDir, "etcd")
	if err := os.MkdirAll(etcdDir, 0o700); err != nil {
		return err
	}
	// etcd's own log is silenced: it reports a clean stop as errors. A
	// failure to start still comes back from StartEmbedded.
	opts := append([]etcdtest.Option{etcdtest.WithLogger(zap.NewNop()), etcdtest.WithConfig(devEtcd)}, cfg.EtcdOptions...)
	// etcd answers on a unix socket inside the 0700 data directory, made
	// 0600, so no other local user can reach it (a TCP port on loopback is
	// anyone's on the machine).
	sock := filepath.Join(etcdDir, "client.sock")
	_ = os.Remove(sock) // left by a killed run
	e, err := etcdtest.StartEmbedded(etcdDir, "unix://"+sock, opts...)
	if err != nil {
		return err
	}
	defer e.Close() // last: everything below uses it
	if err := os.Chmod(sock, 0o600); err != nil {
		return fmt.Errorf("etcd socket: %w", err)
	}
	cli, err := newEtcdClient([]string{"unix://" + sock})
	if err != nil {
		return err
	}
	defer cli.Close() // before e.Close: open watches would make it wait

	mode, err := timeSlicingMode(cfg.TimeSlicing)
	if err != nil {
		return err
	}
	guard, err := newGuard(ctx, cli, cfg.Logger, cfg.Auth)
	if err != nil {
		return err
	}
	// Every service's series and the agents' GPU series, on the operations
	// listener.
	reg, err := metrics.NewRegistry()
	if err != nil {
		return err
	}
	gpus, err := gpumetrics.NewMetrics(reg)
	if err != nil {
		return err
	}
	usage, restarts := agent.NewPodUsage(), agent.NewRestarts()
	if err := errors.Join(reg.Register(usage), reg.Register(restarts)); err != nil {
		return err
	}
	hist, err := cfg.History.open(filepath.Join(cfg.DataDir, "tsdb"), cfg.Logger)
	if err != nil {
		return err
	}
	var routes map[string]http.Handler
	if hist != nil {
		defer hist.Close() // after the group: the collector and the API stop first
		routes = hist.API()
	}
	if cfg.Metrics.Listen != "" && cfg.Metrics.TokenFile == "" {
		if cfg.Metrics.TokenFile, err = devMetricsToken(cfg.DataDir); err != nil {
			return err
		}
	}
	ops, err := cfg.Metrics.listen(reg, cfg.Logger, routes)
	if err != nil {
		return err
	}
	if ops != nil {
		defer ops.Close() // a no-op once served; releases it on the error paths
	}
	sc := serverConfig(cfg.Listen, cfg.Logger, cfg.OpenAPI, guard, reg)
	if DevOneUser(cfg.Engine) && cfg.Nodes > 0 {
		sc.Auth = oneUserGate(sc.Auth)
	}
	srv, err := grpcserver.New(sc)
	if err != nil {
		return err
	}
	// The workload service asks the QuotaService about projects over a
	// loopback connection to this same server (grpc.NewClient connects
	// lazily, so the server need not serve yet).
	loop, err := dialService(srv.Addr(), Workload, guard, reg, nil)
	if err != nil {
		_ = srv.Close()
		return err
	}
	defer loop.Close()
	if cfg.Scheduler.MaxOps == 0 {
		cfg.Scheduler.MaxOps = DevMaxTxnOps
	}
	tools, err := listenTools(cfg.ProxyListen, cfg.Listen, srv.Addr(), cfg.Logger)
	if err != nil {
		_ = srv.Close()
		return err
	}
	defer tools.close()
	d := buildDeps{etcd: cli, quotaConn: loop, replica: "dev", logger: cfg.Logger, scheduler: cfg.Scheduler, examples: true, metrics: reg,
		guard: guard, identity: cfg.Identity, notifications: workload.NotificationConfig{Egress: egress.Policy{AllowLoopback: true}},
		proxyURL: tools.url}
	if cfg.Notifications != nil {
		d.notifications = *cfg.Notifications
	}
	if d.credentialKeys, err = devCredentialKeys(cfg.DataDir); err != nil {
		_ = srv.Close()
		return err
	}
	if cfg.Kube != nil {
		// Users' pods become workloads through the WorkloadService, called
		// for one project at a time (kube.Config.Workloads).
		kconn, err := dialServiceAs(srv.Addr(), guard.ProjectCredentials(kube.ServiceName), reg, nil)
		if err != nil {
			_ = srv.Close()
			return err
		}
		defer kconn.Close()
		// Pods' credentials are opened as their nodes' agents.
		cconn, err := dialServiceAs(srv.Addr(), guard.NodeAgentsCredentials(), reg, nil)
		if err != nil {
			_ = srv.Close()
			return err
		}
		defer cconn.Close()
		if err := kubeRuntime(*cfg.Kube, &d.scheduler, cli, kconn, cconn, cfg.Logger); err != nil {
			_ = srv.Close()
			return err
		}
		keys, err := cfg.Kube.nodeKeys(cli)
		if err != nil {
			_ = srv.Close()
			return err
		}
		d.nodeKeys = keys
	}
	var runs []built
	var ids *identity.Server
	if hist != nil {
		d.history, d.historyInterval = hist, cfg.History.interval()
		if d.blobs, err = blob.NewDir(filepath.Join(cfg.DataDir, "blobs")); err != nil {
			_ = srv.Close()
			return err
		}
	}
	for _, name := range Services {
		if name == Metrics && d.history == nil {
			continue // no history, nothing to read
		}
		b, err := build(name, d)
		if err != nil {
			_ = srv.Close()
			return fmt.Errorf("%s: %w", name, err)
		}
		srv.Register(b.svc.Register)
		srv.RegisterGateway(b.svc.RegisterGateway)
		if err := registerCollectors(reg, b); err != nil {
			_ = srv.Close()
			return err
		}
		if s, ok := b.svc.(*scheduler.Server); ok {
			s.SetAddress(srv.Addr())
		}
		if b.run != nil {
			runs = append(runs, b)
		}
		if s, ok := b.svc.(*identity.Server); ok {
			ids = s
		}
	}
	srv.Register(reg.InitializeServer)
	if err := reg.RegisterAll(guard.Collectors()...); err != nil {
		_ = srv.Close()
		return err
	}
	g := newGroup(ctx)
	g.Go("guard", guard.Run) // first: the bootstrap waits for it to see the administrator
	token, err := bootstrap(ctx, ids, guard, cfg.Out)
	if err != nil {
		_ = srv.Close()
		g.cancel()
		_ = g.Wait()
		return err
	}
	g.Go("server", srv.Serve)
	g.Go("tool proxy", tools.serve)
	if ops != nil {
		g.Go("operations listener", ops.Serve)
	}
	if hist != nil {
		g.Go("history", func(ctx context.Context) error { return hist.Collect(ctx, reg, cfg.History.interval(), time.Now) })
	}
	compactor := DevCompaction
	compactor.Client, compactor.Logger = cli, cfg.Logger
	g.Go("etcd compaction", compactor.Run)
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
		var backend gpu.Backend = simulated.New(simulated.Config{Count: cfg.GPUsPerNode, Node: node})
		if cfg.Backend != nil {
			backend = cfg.Backend(node)
		}
		acfg := agent.Config{Node: node, Client: cli, DataDir: dir, Listen: "127.0.0.1:0", LeaseTTL: cfg.LeaseTTL, StopGrace: cfg.StopGrace,
			PodUIDs: local.DefaultUIDs, Engine: cfg.Engine, Hide: []string{cfg.DataDir, cfg.Metrics.TokenFile}, // env, etcd, keys
			Auth: guard.UnaryInterceptor, AuthStream: guard.StreamInterceptor,
			Backend: backend, Metrics: gpus, Usage: usage, Restarts: restarts, Logger: cfg.Logger}
		// The agent opens its pods' credentials as its node, over loopback.
		cconn, err := dialServiceAs(srv.Addr(), guard.NodeAgentCredentials(nodemanager.NodeName(node)), nil, nil)
		if err != nil {
			g.cancel()
			_ = g.Wait()
			return err
		}
		defer cconn.Close()
		acfg.Credentials = workloadv1.NewCredentialServiceClient(cconn)
		g.Go("agent "+node, func(ctx context.Context) error { return agent.Run(ctx, acfg) })
	}
	if mode != quotav1.TimeSlicingMode_TIME_SLICING_MODE_UNSPECIFIED {
		if err := setTimeSlicing(ctx, srv.Addr(), token, mode); err != nil {
			g.cancel()
			_ = g.Wait()
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "env"), []byte(EnvLines(srv.Addr(), token)), 0o600); err != nil {
		g.cancel()
		_ = g.Wait()
		return err
	}
	cfg.Logger.Info("runway dev: ready", "addr", srv.Addr(), "etcd", "unix://"+sock,
		"nodes", cfg.Nodes, "gpusPerNode", cfg.GPUsPerNode, "dataDir", cfg.DataDir,
		"transport", "plaintext on loopback only (runway serve --tls-cert-file for a network)", "isolation", DevIsolation(cfg.Engine))
	if cfg.ProxyReady != nil {
		cfg.ProxyReady(tools.ln.Addr().String())
	}
	if ready != nil {
		ready(srv.Addr(), token)
	}
	return g.Wait()
}

// bootstrap creates the administrator on the first start (announcing its
// one-time password on out), and returns a token for it, once the guard has
// seen the administrator and its access rule.
func bootstrap(ctx context.Context, ids *identity.Server, guard *auth.Guard, out io.Writer) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	password, err := ids.Bootstrap(ctx)
	if err != nil {
		return "", err
	}
	if password != "" && out != nil {
		fmt.Fprintln(out, BootstrapLine(password))
	}
	if err := guard.Sync(ctx); err != nil {
		return "", fmt.Errorf("wait for the bootstrap administrator: %w", err)
	}
	return ids.Token(ctx, identity.BootstrapAdmin, auth.DefaultMaxTokenTTL)
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
// QuotaService at addr, as `runway nodepool update` would, as the
// administrator (token).
func setTimeSlicing(ctx context.Context, addr, token string, mode quotav1.TimeSlicingMode) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := dialAs(addr, auth.Bearer(token))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = quotav1.NewQuotaServiceClient(conn).UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{
		NodePool:   &quotav1.NodePool{Name: "nodepools/default", TimeSlicing: &quotav1.TimeSlicing{Mode: mode}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"time_slicing.mode"}},
	}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("--time-slicing: set the default node pool: %w", err)
	}
	return nil
}

// CredentialsKeyName is the credentials key file runway dev keeps in its
// data directory (mode 0600).
const CredentialsKeyName = "credentials.keys"

// devCredentialKeys loads runway dev's credentials key file, made on the
// first start.
func devCredentialKeys(dataDir string) (*sealing.Ring, error) {
	path := filepath.Join(dataDir, CredentialsKeyName)
	if _, err := sealing.Create(path); err != nil {
		return nil, fmt.Errorf("credentials key file: %w", err)
	}
	return sealing.Load(path)
}
