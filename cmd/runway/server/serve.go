package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/blob"
	"github.com/runwayhq/runway/pkg/egress"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/history"
	"github.com/runwayhq/runway/pkg/metrics"
	"github.com/runwayhq/runway/pkg/sealing"
	"github.com/runwayhq/runway/services/identity"
	"github.com/runwayhq/runway/services/nodemanager/kube"
	"github.com/runwayhq/runway/services/scheduler"
	"github.com/runwayhq/runway/services/workload"
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
	// TLS, when its files are set, serves Listen over TLS only (mutual TLS
	// with ClientCAFile).
	TLS ServerTLS
	// AgentServerName, when set, is the name every node agent's certificate
	// must carry when the workload service reaches agents over TLS (one name
	// for all agents, as their addresses come and go); empty checks each
	// agent's certificate against the host of its advertised address.
	AgentServerName string
	// TrustedProxies are the load balancers whose X-Forwarded-For the audit
	// log believes.
	TrustedProxies []netip.Prefix
	// ProxyURL is the tool proxy's public URL (the gateway's
	// --proxy-listen, as clients reach it): the workload service gives
	// tool URLs under it. Empty: none.
	ProxyURL string
	// QuotaServer is the QuotaService's address; required by the workload
	// service, which asks it whether a project exists.
	QuotaServer string
	// Replica names a scheduler replica in the election; the host name
	// when empty.
	Replica string
	// NodeLostGrace is the scheduler's scheduler.Config.NodeLostGrace
	// (when 0: DefaultNodeLostGrace, DefaultKubeNodeLostGrace with
	// RuntimeKubernetes).
	NodeLostGrace time.Duration
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
	// CredentialsKeyFile is the workload service's key file of
	// credentials (pkg/sealing): without one, credentials cannot be
	// created or given to pods.
	CredentialsKeyFile string
	// NotificationEgress is where the workload service may send
	// notifications (webhooks, SMTP servers) beyond public addresses.
	NotificationEgress egress.Policy
	// NotificationCAFile holds the CAs (PEM) that webhooks' and SMTP
	// servers' certificates are checked against; the system's when empty.
	NotificationCAFile string
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Out gets the bootstrap administrator's one-time password when the
	// identity service creates it (its first start); nil discards it.
	Out io.Writer
	// Auth tunes tokens and the audit log.
	Auth auth.Config
	// Identity configures the identity service (OIDC, bcrypt cost).
	Identity identity.Config
	// Ready, when set, is called with the listening address once the
	// service is built and about to serve.
	Ready func(addr string)
	// Metrics is the operations listener (GET /metrics).
	Metrics MetricsConfig
	// PrometheusURL is the Prometheus-compatible server the metrics
	// service reads history from, scraping every HistoryInterval (rate()
	// windows span several; reports integrate over the samples' own
	// timestamps, whatever the interval). The reports' CSVs are kept in a bucket of
	// an S3-compatible store (BlobS3, when its Endpoint is set) or in
	// BlobDir. A history and one blob store are required by the metrics
	// service.
	PrometheusURL   string
	HistoryInterval time.Duration
	BlobDir         string
	BlobS3          blob.S3Config
	// EtcdMaxTxnOps is the etcd cluster's --max-txn-ops (etcd's default
	// 128 when 0): the scheduler writes each workload's plan in one
	// transaction and leaves out (with an error) a workload whose writes
	// exceed it. Run etcd with a higher --max-txn-ops (DevMaxTxnOps fits
	// the largest gang) and give the same number here.
	EtcdMaxTxnOps int
}

// DefaultNodeLostGrace is the scheduler's default grace for a node whose
// agent's lease expired.
const DefaultNodeLostGrace = scheduler.DefaultNodeLostGrace

// DefaultKubeNodeLostGrace is the grace with RuntimeKubernetes, of a node
// NotReady or whose registration expired.
const DefaultKubeNodeLostGrace = kube.DefaultNodeLostGrace

// ServerTLS are the PEM files of a listener's TLS.
type ServerTLS struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, requires every client to present a
	// certificate signed by one of its CAs (mutual TLS).
	ClientCAFile string
	// CAFile is what the other services' and the node agents' certificates
	// must chain to when this one calls them (--quota-server,
	// --workload-server, the agents' pod output) over TLS; it presents
	// CertFile to them.
	CAFile string
}

// serverTLS is the TLS of a listener at addr (grpcserver.LoadTLS); nil, and a
// warning in the log, without a certificate.
func (t ServerTLS) serverTLS(addr string, log *slog.Logger) (*tls.Config, error) {
	if t.CertFile == "" && t.KeyFile == "" {
		if t.ClientCAFile != "" {
			return nil, errors.New("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
		}
		if !metrics.Loopback(addr) {
			log.Warn("serving plaintext: set --tls-cert-file and --tls-key-file on any network but loopback", "addr", addr)
		}
		return nil, nil
	}
	return grpcserver.LoadTLS(t.CertFile, t.KeyFile, t.ClientCAFile)
}

// clientTLS is the TLS of this service's calls to the others; nil (plaintext)
// without a CA file.
func (t ServerTLS) clientTLS() (*tls.Config, error) {
	if t.CAFile == "" {
		return nil, nil
	}
	pool, err := grpcserver.LoadCAs(t.CAFile)
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate %s: %w", t.CertFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
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
	peerTLS, err := cfg.TLS.clientTLS()
	if err != nil {
		return err
	}
	guard, err := newGuard(ctx, cli, cfg.Logger, cfg.Auth)
	if err != nil {
		return err
	}
	reg, err := metrics.NewRegistry()
	if err != nil {
		return err
	}
	d := buildDeps{etcd: cli, replica: cfg.Replica, logger: cfg.Logger, guard: guard, identity: cfg.Identity, metrics: reg,
		scheduler:     scheduler.Config{NodeLostGrace: cfg.NodeLostGrace},
		notifications: workload.NotificationConfig{Egress: cfg.NotificationEgress}, proxyURL: cfg.ProxyURL}
	if cfg.NotificationCAFile != "" {
		pem, err := os.ReadFile(cfg.NotificationCAFile)
		if err != nil {
			return fmt.Errorf("--notification-ca-file: %w", err)
		}
		d.notifications.RootCAs = x509.NewCertPool()
		if !d.notifications.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--notification-ca-file %s: no PEM certificate in it", cfg.NotificationCAFile)
		}
	}
	if cfg.CredentialsKeyFile != "" {
		if d.credentialKeys, err = sealing.Load(cfg.CredentialsKeyFile); err != nil {
			return fmt.Errorf("--credentials-key-file: %w", err)
		}
	}
	if cfg.PrometheusURL != "" {
		if d.history, err = history.NewRemote(cfg.PrometheusURL, nil); err != nil {
			return err
		}
		d.historyInterval = cfg.HistoryInterval
	}
	switch {
	case cfg.BlobDir != "" && cfg.BlobS3.Endpoint != "":
		return errors.New("--blob-dir and --blob-s3-endpoint: choose one blob store")
	case cfg.BlobDir != "":
		if d.blobs, err = blob.NewDir(cfg.BlobDir); err != nil {
			return err
		}
	case cfg.BlobS3.Endpoint != "":
		if d.blobs, err = blob.NewS3(ctx, cfg.BlobS3); err != nil {
			return err
		}
	}
	d.scheduler.MaxOps = cfg.EtcdMaxTxnOps
	if peerTLS != nil {
		d.agentTLS = peerTLS.Clone()
		d.agentTLS.ServerName = cfg.AgentServerName
		d.scheduler.PeerTransport = credentials.NewTLS(peerTLS)
	}
	if cfg.QuotaServer != "" && cfg.Service == Workload {
		conn, err := dialService(cfg.QuotaServer, Workload, guard, reg, peerTLS)
		if err != nil {
			return err
		}
		defer conn.Close()
		d.quotaConn = conn
	}
	var webhook func(context.Context) error
	switch {
	case cfg.Service == NodeManager && (cfg.Runtime == RuntimeKubernetes || cfg.Kube.AgentTokenReview):
		// It gives the node agents their nodes' mark keys.
		keys, err := cfg.Kube.nodeKeys(cli)
		if err != nil {
			return err
		}
		d.nodeKeys = keys
	case cfg.Runtime == RuntimeKubernetes && cfg.Service != Scheduler:
		return errors.New("--runtime kubernetes is the scheduler's (it runs on the leader) and the nodemanager's (it gives the node agents their keys)")
	case cfg.Runtime == RuntimeKubernetes && cfg.WorkloadServer == "":
		return errors.New("--runtime kubernetes needs --workload-server (users' pods become workloads there)")
	case cfg.Runtime == RuntimeKubernetes:
		conn, err := dialServiceAs(cfg.WorkloadServer, guard.ProjectCredentials(kube.ServiceName), reg, peerTLS)
		if err != nil {
			return err
		}
		defer conn.Close()
		cconn, err := dialServiceAs(cfg.WorkloadServer, guard.NodeAgentsCredentials(), reg, peerTLS)
		if err != nil {
			return err
		}
		defer cconn.Close()
		if err := kubeRuntime(cfg.Kube, &d.scheduler, cli, conn, cconn, cfg.Logger); err != nil {
			return err
		}
		if webhook, err = cfg.Kube.webhook(cfg.Logger); err != nil {
			return err
		}
	case cfg.Runtime != "" && cfg.Runtime != RuntimeLocal:
		return fmt.Errorf("--runtime %q: want %s or %s", cfg.Runtime, RuntimeLocal, RuntimeKubernetes)
	}
	b, err := build(cfg.Service, d)
	if err != nil {
		return err
	}
	if ids, ok := b.svc.(*identity.Server); ok {
		bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		password, err := ids.Bootstrap(bctx)
		cancel()
		if err != nil {
			return err
		}
		if password != "" && cfg.Out != nil {
			fmt.Fprintln(cfg.Out, BootstrapLine(password))
		}
	}
	if err := reg.RegisterAll(guard.Collectors()...); err != nil {
		return err
	}
	if err := registerCollectors(reg, b); err != nil {
		return err
	}
	ops, err := cfg.Metrics.withAPI(cfg.TLS).listen(reg, cfg.Logger, nil)
	if err != nil {
		return err
	}
	scfg := serverConfig(cfg.Listen, cfg.Logger, cfg.OpenAPI, guard, reg)
	scfg.TrustedProxies = cfg.TrustedProxies
	if scfg.TLS, err = cfg.TLS.serverTLS(cfg.Listen, cfg.Logger); err != nil {
		if ops != nil {
			_ = ops.Close()
		}
		return err
	}
	srv, err := grpcserver.New(scfg)
	if err != nil {
		if ops != nil {
			_ = ops.Close()
		}
		return err
	}
	srv.Register(b.svc.Register)
	srv.Register(reg.InitializeServer)
	srv.RegisterGateway(b.svc.RegisterGateway)
	if s, ok := b.svc.(*scheduler.Server); ok {
		s.SetAddress(srv.Addr())
	}
	g := newGroup(ctx)
	g.Go("guard", guard.Run)
	g.Go("server", srv.Serve)
	if ops != nil {
		g.Go("operations listener", ops.Serve)
	}
	if webhook != nil {
		g.Go("admission webhook", webhook)
	}
	if b.run != nil {
		g.Go(b.name, b.run)
	}
	if cfg.Ready != nil {
		cfg.Ready(srv.Addr())
	}
	return g.Wait()
}
