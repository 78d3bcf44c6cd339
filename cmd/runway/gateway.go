package main

import (
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/runwayhq/runway/cmd/runway/server"
)

func gatewayCommand() *cobra.Command {
	var (
		cfg     server.FrontDoorConfig
		proxies []string
		openapi string
		mf      metricsFlags
	)
	servers := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Serve every Runway service at one address, in front of the separate services",
		Long: `Where each service runs as its own runway serve, the gateway is the one address
clients use (the CLI's --server, the SDK, the web UI): it passes each gRPC call
to the service that owns it, by the call's service name, and each REST call by
its path, and serves the web UI, which then reaches every service.

Calls pass through unchanged, with their caller's token: each service
authenticates and authorises them itself. The gateway adds the client's address
(X-Forwarded-For), which a service believes when the gateway is one of its
--trusted-proxies. A call for a service without an address here is
Unimplemented. It holds each call to the services' limits before passing it
on: 1 MiB a message or REST body, pkg/bounds' limits on every field, and the
services' timeouts on slow clients.

--proxy-listen serves the tool proxy: workloads' tools (an environment's
--tool) at /proxy/projects/P/workloads/W/TOOL/, on an origin of its own,
to callers who may view the workload (their bearer token, or a cookie the
web UI gets from a one-time ticket). The workload service's --proxy-url
must name its public URL for tool URLs to be given.

--metrics-listen serves its Prometheus metrics (the calls it passed, by
method and code, and its calls to each service) on an operations address of
its own; one that is not loopback needs --metrics-token-file. With
--tls-cert-file it serves HTTPS only, with the same certificate and client CA
(--metrics-tls-cert-file, --metrics-tls-key-file and
--metrics-tls-client-ca-file give it others).

It runs until SIGINT or SIGTERM and then shuts down cleanly.`,
		Example: `  runway gateway --listen 0.0.0.0:7070 --identity-server identity:7070 --quota-server quota:7070 \
    --workload-server workload:7070 --scheduler-server scheduler:7070 --nodemanager-server nodemanager:7070`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, p := range proxies {
				prefix, err := netip.ParsePrefix(p)
				if err != nil {
					return usageError("--trusted-proxies: %v", err)
				}
				cfg.TrustedProxies = append(cfg.TrustedProxies, prefix)
			}
			cfg.Servers = map[string]string{}
			for name, addr := range servers {
				if *addr != "" {
					cfg.Servers[name] = *addr
				}
			}
			b, err := server.LoadOpenAPI(openapi)
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			cfg.OpenAPI = b
			if cfg.Metrics, err = mf.config(""); err != nil {
				return usageError("%v", err)
			}
			ctx, stop := untilSignal(cmd.Context())
			defer stop()
			return server.FrontDoor(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "gRPC and REST address of every service")
	for _, name := range server.Services {
		servers[name] = f.String(name+"-server", "", "the "+name+" service's address")
	}
	f.StringVar(&cfg.TLS.CertFile, "tls-cert-file", "", "server certificate (PEM): serve --listen over TLS only")
	f.StringVar(&cfg.TLS.KeyFile, "tls-key-file", "", "server key (PEM) for --tls-cert-file")
	f.StringVar(&cfg.TLS.ClientCAFile, "tls-client-ca-file", "", "CA bundle (PEM) clients' certificates must chain to: mutual TLS")
	f.StringVar(&cfg.TLS.CAFile, "tls-ca-file", "", "CA bundle (PEM) the services' certificates chain to: call them over TLS")
	f.StringVar(&cfg.ProxyListen, "proxy-listen", "", "serve the tool proxy (workloads' tools at /proxy/projects/P/workloads/W/TOOL/) on this address, an origin of its own; none by default")
	f.StringSliceVar(&proxies, "trusted-proxies", nil, "CIDRs of the load balancers whose X-Forwarded-For the gateway believes, comma-separated")
	mf.add(f, "serve Prometheus metrics on ADDR/metrics (for example 127.0.0.1:7071); none by default")
	f.StringVar(&openapi, "openapi", server.DefaultOpenAPIPath, "OpenAPI document to serve as /openapi.json")
	return cmd
}
