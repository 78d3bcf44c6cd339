package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/runwayhq/runway/cmd/runway/server"
	"github.com/runwayhq/runway/pkg/history"
)

func devCommand() *cobra.Command {
	var (
		cfg       server.DevConfig
		openapi   string
		oidc      oidcFlags
		mf        metricsFlags
		noHistory bool
		runtime   string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole control plane in one process, with simulated nodes",
		Long: `Run Runway in one process: an embedded etcd (data in DATA-DIR/etcd), every
service on one gRPC+REST listener, the scheduler, and --nodes node agents
(node-1..node-N) with --gpus-per-node simulated GPUs each (pods under
DATA-DIR/nodes/NAME).

On the first start it creates the administrator users/admin and prints its
one-time password once. Once serving it prints "export RUNWAY_SERVER=ADDR" and
"export RUNWAY_TOKEN=TOKEN" (the administrator's, valid 30 days) on stdout
and writes the same lines to DATA-DIR/env. It runs until SIGINT or SIGTERM and then shuts down
cleanly; starting again on the same DATA-DIR resumes where it stopped.

--runtime picks how pods run: "container" runs each as a container of its
image on a Docker Engine API (DOCKER_HOST, else /var/run/docker.sock, else
podman's /run/podman/podman.sock or $XDG_RUNTIME_DIR/podman/podman.sock);
"process" as a host process; "auto" (the default) containers when an engine
answers, else processes. It says which on stderr once serving.

--time-slicing sets the default node pool's time-slicing mode (off, strict or
fair).

GET /metrics on the operations address (--metrics-listen; by default the
--listen host on the next port, 127.0.0.1:7071) serves every service's
Prometheus metrics: gRPC calls, queues (deserved, fair share, allocated,
requested, limit), pending workloads by check, cycle and plan-apply times,
bindings and evictions by rule, workloads, nodes and GPU devices, sign-ins,
the audit log and the agents' GPU utilisation. "none" turns it off. Every
request must carry "Authorization: Bearer TOKEN", the token in
--metrics-token-file or, by default, DATA-DIR/metrics-token (written on the
first start, readable by its owner only): the series name every tenant's
projects and workloads.

The same series are kept as history in DATA-DIR/tsdb (Prometheus's TSDB),
gathered every --history-interval and kept for --history-retention, and
answered with PromQL on the operations address in Prometheus's HTTP API
(/api/v1/query, /api/v1/query_range, /api/v1/series, /api/v1/labels): add
http://127.0.0.1:7071 to Grafana as a Prometheus data source, with that
token as its bearer token.

The tool proxy serves workloads' tools (an environment's --tool) on a
listener of its own, --proxy-listen (by default the --listen host on a free
port), at /proxy/projects/P/workloads/W/TOOL/: to callers who may view the
workload, with their bearer token or a cookie from the web UI. It says where
on stderr once serving.

GET /openapi.json serves --openapi (by default gen/openapi/runway.swagger.json
relative to the working directory, when that file exists).`,
		Example: `  runway dev --data-dir /tmp/rwdev --nodes 2 --gpus-per-node 2
  eval "$(cat /tmp/rwdev/env)"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sso, err := oidc.config()
			if err != nil {
				return err
			}
			cfg.Identity.OIDC = sso
			b, err := server.LoadOpenAPI(openapi)
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			cfg.OpenAPI = b
			cfg.History.Off = noHistory
			if cfg.Metrics, err = mf.config(cfg.Listen); err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			var metricsAddr, proxyAddr string
			cfg.Metrics.Ready = func(addr string) { metricsAddr = addr }
			cfg.ProxyReady = func(addr string) { proxyAddr = addr }
			tokenFile := cfg.Metrics.TokenFile
			if tokenFile == "" {
				tokenFile = filepath.Join(cfg.DataDir, server.DevMetricsTokenFile)
			}
			ctx, stop := untilSignal(cmd.Context())
			defer stop()
			if cfg.Engine, err = server.ResolveRuntime(ctx, runtime); err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			cfg.Out = cmd.OutOrStdout()
			return server.RunDev(ctx, cfg, func(addr, token string) {
				fmt.Fprint(cmd.OutOrStdout(), server.EnvLines(addr, token))
				if metricsAddr != "" {
					scheme := "http"
					if cfg.Metrics.TLS.CertFile != "" {
						scheme = "https"
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "Metrics: %s://%s/metrics and PromQL on /api/v1/, with the bearer token in %s\n",
						scheme, metricsAddr, tokenFile)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "Tools: http://%s/proxy/projects/P/workloads/W/TOOL/ (workload describe prints each tool's URL)\n", proxyAddr)
				fmt.Fprintln(cmd.ErrOrStderr(), runtimeLine(cfg.Engine, runtime))
				fmt.Fprintf(cmd.ErrOrStderr(), "Runway is serving on %[1]s (gRPC, REST and /openapi.json). Point the CLI at it from another shell:\n"+
					"  eval \"$(cat %[2]s)\"\n  runway project create team-a --gpu 2\n  runway training submit a1 -p team-a -i %[3]s -g 1 -- sleep 600\n"+
					"  runway workload list -A\n", addr, filepath.Join(cfg.DataDir, "env"), exampleImage(cfg.Engine))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", "", "directory for etcd's data, the nodes' pods and the env file (required)")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "gRPC and REST address of all the services")
	f.StringVar(&cfg.ProxyListen, "proxy-listen", "", "address of the tool proxy, an origin of its own (default: the --listen host on a free port)")
	f.IntVar(&cfg.Nodes, "nodes", 1, "number of in-process node agents")
	f.IntVar(&cfg.GPUsPerNode, "gpus-per-node", 8, "simulated GPUs per node")
	f.DurationVar(&cfg.Scheduler.NodeLostGrace, "node-lost-grace", server.DefaultNodeLostGrace, "how long a node whose agent's lease expired keeps its pods before they are lost (NODE_LOST)")
	f.StringVar(&runtime, "runtime", server.RuntimeAuto, "how pods run: auto (containers when a Docker Engine API answers, else host processes), container or process (one machine: a distributed training's pods meet at 127.0.0.1, each on a port of its own)")
	f.StringVar(&cfg.TimeSlicing, "time-slicing", "", "time-slicing mode of the default node pool: off, strict or fair (default: as stored)")
	f.StringVar(&openapi, "openapi", server.DefaultOpenAPIPath, "OpenAPI document to serve as /openapi.json")
	oidc.add(f)
	f.BoolVar(&noHistory, "no-history", false, "keep no metrics history (DATA-DIR/tsdb)")
	f.DurationVar(&cfg.History.Interval, "history-interval", history.DefaultInterval, "how often the metrics history gathers the series")
	f.DurationVar(&cfg.History.Retention, "history-retention", history.DefaultRetention, "how long the metrics history keeps samples")
	mf.add(f, `serve Prometheus metrics on ADDR/metrics, apart from the API (default: the --listen host, next port; "none": off)`)
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

// runtimeLine says in one line how `runway dev`'s pods run and what
// isolation they get.
func runtimeLine(engine, runtime string) string {
	if engine != "" {
		return "Workloads run as containers of their images on " + engine + ": " + server.DevIsolation(engine) + "."
	}
	why := "no container engine answers"
	if runtime == server.RuntimeProcess {
		why = "--runtime process"
	}
	return "Workloads run as host processes (" + why + "): " + server.DevIsolation(engine) + "."
}

// exampleImage is the image of the quick start's example: one the engine
// can pull, or any name for host processes (which ignore it).
func exampleImage(engine string) string {
	if engine != "" {
		return "busybox"
	}
	return "quickstart"
}
