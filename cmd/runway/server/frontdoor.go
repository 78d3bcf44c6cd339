package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	metricsv1 "github.com/runwayhq/runway/gen/go/runway/metrics/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/frontdoor"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/metrics"
	"github.com/runwayhq/runway/pkg/webui"
)

// FrontDoorConfig is the one address of a split deployment (`runway
// gateway`, pkg/frontdoor).
type FrontDoorConfig struct {
	// Listen is the gRPC+REST address clients use. Required.
	Listen string
	// TLS serves Listen over TLS (as ServeConfig.TLS); its CAFile, when set,
	// is what the services' certificates must chain to, and CertFile is
	// presented to them.
	TLS ServerTLS
	// Servers maps a service name (Services) to its address; a call for a
	// service not listed is Unimplemented. At least one.
	Servers map[string]string
	// TrustedProxies are the load balancers in front of the front door.
	TrustedProxies []netip.Prefix
	// OpenAPI is served as GET /openapi.json.
	OpenAPI []byte
	// Metrics is the operations listener (GET /metrics): the calls it
	// passes, by method and code, as a service's.
	Metrics MetricsConfig
	// ProxyListen, when set, serves the tool proxy (pkg/toolproxy) there,
	// an origin of its own, in front of the workload service (over TLS
	// with TLS's certificate when it has one).
	ProxyListen string
	// ProxyReady, when set, is called with the proxy's address.
	ProxyReady func(addr string)
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Ready, when set, is called with the listening address.
	Ready func(addr string)
}

// frontDoorServices are the gRPC services each Runway service serves, and
// their REST handlers.
var frontDoorServices = map[string][]struct {
	name    string
	gateway grpcserver.GatewayFunc
}{
	Identity: {{identityv1.IdentityService_ServiceDesc.ServiceName, identityv1.RegisterIdentityServiceHandler}},
	Quota:    {{quotav1.QuotaService_ServiceDesc.ServiceName, quotav1.RegisterQuotaServiceHandler}},
	Workload: {{workloadv1.WorkloadService_ServiceDesc.ServiceName, workloadv1.RegisterWorkloadServiceHandler},
		{workloadv1.GovernanceService_ServiceDesc.ServiceName, workloadv1.RegisterGovernanceServiceHandler},
		{workloadv1.CredentialService_ServiceDesc.ServiceName, workloadv1.RegisterCredentialServiceHandler},
		{workloadv1.ToolService_ServiceDesc.ServiceName, workloadv1.RegisterToolServiceHandler}},
	Scheduler:   {{schedulerv1.SchedulerService_ServiceDesc.ServiceName, schedulerv1.RegisterSchedulerServiceHandler}},
	NodeManager: {{nodemanagerv1.NodeManagerService_ServiceDesc.ServiceName, nodemanagerv1.RegisterNodeManagerServiceHandler}},
	Metrics: {{metricsv1.MetricsService_ServiceDesc.ServiceName, metricsv1.RegisterMetricsServiceHandler},
		{metricsv1.ReportService_ServiceDesc.ServiceName, metricsv1.RegisterReportServiceHandler}},
}

// FrontDoor serves every service of Servers on one listener until ctx
// ends: gRPC by service name, REST by the services' own paths, and the web
// UI, which then reaches every service at one origin.
func FrontDoor(ctx context.Context, cfg FrontDoorConfig) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Listen == "" {
		return errors.New("--listen is required")
	}
	if len(cfg.Servers) == 0 {
		return errors.New("the gateway needs the address of at least one service (--quota-server, --workload-server, ...)")
	}
	peerTLS, err := cfg.TLS.clientTLS()
	if err != nil {
		return err
	}
	transport := insecure.NewCredentials()
	if peerTLS != nil {
		transport = credentials.NewTLS(peerTLS)
	}
	reg, err := metrics.NewRegistry()
	if err != nil {
		return err
	}
	routes := frontdoor.Routes{}
	var gateways []grpcserver.GatewayFunc
	for _, name := range Services {
		addr := cfg.Servers[name]
		if addr == "" {
			continue
		}
		// No credentials of its own: each call carries its caller's.
		conn, err := grpc.NewClient("passthrough:///"+addr,
			append(reg.DialOptions(), grpc.WithTransportCredentials(transport))...)
		if err != nil {
			return fmt.Errorf("connect to the %s service at %s: %w", name, addr, err)
		}
		defer conn.Close()
		for _, s := range frontDoorServices[name] {
			routes[s.name] = conn
			gateways = append(gateways, s.gateway)
		}
	}
	for name := range cfg.Servers {
		if !slices.Contains(Services, name) {
			return fmt.Errorf("unknown service %q (want one of %s)", name, strings.Join(Services, ", "))
		}
	}
	scfg := grpcserver.Config{Listen: cfg.Listen, Logger: cfg.Logger, OpenAPI: cfg.OpenAPI, UI: webui.Handler(),
		ShutdownTimeout: DefaultShutdownTimeout, TrustedProxies: cfg.TrustedProxies,
		ServerOptions: append(frontdoor.ServerOptions(routes), reg.ServerOptions()...)}
	if cfg.TLS.CertFile != "" || cfg.TLS.KeyFile != "" {
		if scfg.TLS, err = grpcserver.LoadTLS(cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.ClientCAFile); err != nil {
			return err
		}
	} else {
		cfg.Logger.Warn("serving plaintext: set --tls-cert-file and --tls-key-file on any network but loopback", "addr", cfg.Listen)
	}
	ops, err := cfg.Metrics.withAPI(cfg.TLS).listen(reg, cfg.Logger, nil)
	if err != nil {
		return err
	}
	srv, err := grpcserver.New(scfg)
	if err != nil {
		if ops != nil {
			_ = ops.Close()
		}
		return err
	}
	srv.Register(reg.InitializeServer)
	for _, g := range gateways {
		srv.RegisterGateway(g)
	}
	g := newGroup(ctx)
	if cfg.ProxyListen != "" {
		conn := routes[workloadv1.ToolService_ServiceDesc.ServiceName]
		if conn == nil {
			_ = srv.Close()
			return errors.New("--proxy-listen needs --workload-server: the proxy asks the workload service")
		}
		tools, err := openTools(cfg.ProxyListen, cfg.Listen, conn, scfg.TLS, cfg.Logger)
		if err != nil {
			_ = srv.Close()
			return err
		}
		defer tools.close()
		cfg.Logger.Info("tool proxy serving", "url", tools.url)
		g.Go("tool proxy", tools.serve)
		if cfg.ProxyReady != nil {
			cfg.ProxyReady(tools.ln.Addr().String())
		}
	}
	g.Go("server", srv.Serve)
	if ops != nil {
		g.Go("operations listener", ops.Serve)
	}
	if cfg.Ready != nil {
		cfg.Ready(srv.Addr())
	}
	return g.Wait()
}
