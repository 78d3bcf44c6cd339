package main

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runwayhq/runway/cmd/runway/server"
	"github.com/runwayhq/runway/pkg/history"
)

func serveCommand() *cobra.Command {
	var (
		cfg       server.ServeConfig
		endpoints []string
		proxies   []string
		openapi   string
		oidc      oidcFlags
		mf        metricsFlags
	)
	cmd := &cobra.Command{
		Use:       "serve {" + strings.Join(server.Services, "|") + "}",
		Short:     "Serve one Runway service against an etcd cluster",
		ValidArgs: server.Services,
		Long: `Serve one service on its own gRPC+REST listener, storing in the etcd cluster at
--etcd-endpoints. The scheduler also runs its replica loop: any number of
replicas may run, one leads at a time. The workload service asks the quota
service (--quota-server) whether a project exists.

The identity service creates the administrator users/admin on its first
start and prints its one-time password once. Every service checks the bearer
token of each call against the access rules in etcd.

With --runtime kubernetes the scheduler's leader is the Kubernetes cluster's
scheduler for GPU pods: it registers the cluster's nodes, runs bound
workloads as pods (schedulerName runway) created on their node, and schedules users' pods that name schedulerName runway in a
project's namespace, runway-{project}, as workloads of that project, with
its policies (--workload-server); a runway.io/project label, if any, must
name the same project. A NotReady node keeps its pods, cordoned, for
--node-lost-grace (5m by default, Kubernetes' not-ready toleration, which
Runway's pods carry for as long).
It uses --kubeconfig, or the in-cluster config when run in a pod, with at
most --kube-api-qps requests a second to the apiserver, handling
--kube-workers pods, bindings and nodes at once. A user's pod asking for a
GPU fraction reads its GPU from a ConfigMap the runtime writes at binding
(envFrom, <pod>-runway-gpu); --kube-webhook-listen serves the admission
webhook that adds that reference (over TLS: --kube-webhook-cert-file,
--kube-webhook-key-file).
With --runtime kubernetes the nodemanager gives each node agent its own
node's mark key (the agents hold no other, nor the key they come from): to
a token of --agent-service-account bound to a pod on that node, which it
reviews with the apiserver (TokenReview), and to no one else.

Clients reach every service at one address through runway gateway.

The metrics service answers over-time metrics and telemetry from the
Prometheus-compatible server at --prometheus-url (which scrapes every
service's --metrics-listen), with the same queries runway dev runs on its
embedded history, and keeps consumption reports' CSVs in a bucket of an
S3-compatible store (--blob-s3-endpoint, with the credentials in
--blob-s3-access-key-file and --blob-s3-secret-key-file or
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or in a directory (--blob-dir).

--metrics-listen serves the service's Prometheus metrics (gRPC calls, the
scheduler's queues and decisions, sign-ins, audit) on an operations address
of its own; one that is not loopback needs --metrics-token-file. With
--tls-cert-file it serves HTTPS only, with the same certificate and client CA
(--metrics-tls-cert-file, --metrics-tls-key-file and
--metrics-tls-client-ca-file give it others).

It runs until SIGINT or SIGTERM and then shuts down cleanly.`,
		Example: `  runway serve identity --etcd-endpoints 127.0.0.1:2379 --listen 127.0.0.1:7074
  runway serve quota --etcd-endpoints 127.0.0.1:2379 --listen 127.0.0.1:7071
  runway serve workload --etcd-endpoints 127.0.0.1:2379 --listen 127.0.0.1:7072 --quota-server 127.0.0.1:7071
  runway serve scheduler --etcd-endpoints 127.0.0.1:2379 --listen 127.0.0.1:7073
  runway serve scheduler --etcd-endpoints etcd:2379 --runtime kubernetes --workload-server workload:7070`,
		Args: cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			sso, err := oidc.config()
			if err != nil {
				return err
			}
			cfg.Identity.OIDC = sso
			for _, p := range proxies {
				prefix, err := netip.ParsePrefix(p)
				if err != nil {
					return usageError("--trusted-proxies: %v", err)
				}
				cfg.TrustedProxies = append(cfg.TrustedProxies, prefix)
			}
			b, err := server.LoadOpenAPI(openapi)
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			cfg.Service, cfg.EtcdEndpoints, cfg.OpenAPI, cfg.Out = args[0], endpoints, b, cmd.OutOrStdout()
			if cfg.Metrics, err = mf.config(""); err != nil {
				return err
			}
			ctx, stop := untilSignal(cmd.Context())
			defer stop()
			return server.Serve(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&endpoints, "etcd-endpoints", nil, "etcd client endpoints, comma-separated (required)")
	f.StringVar(&cfg.EtcdTLS.CAFile, "etcd-ca-file", "", "CA bundle that verifies etcd's certificate (TLS to etcd)")
	f.StringVar(&cfg.EtcdTLS.CertFile, "etcd-cert-file", "", "client certificate for etcd")
	f.StringVar(&cfg.EtcdTLS.KeyFile, "etcd-key-file", "", "client key for etcd")
	f.IntVar(&cfg.EtcdMaxTxnOps, "etcd-max-txn-ops", 0, "the etcd cluster's --max-txn-ops; the scheduler writes each workload's plan in one transaction of at most this many operations (default etcd's 128; run etcd with --max-txn-ops "+strconv.Itoa(server.DevMaxTxnOps)+" for gangs of every size)")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "gRPC and REST address")
	f.StringVar(&cfg.ProxyURL, "proxy-url", "", "the workload service: public URL of the tool proxy (runway gateway --proxy-listen), under which workloads' tool URLs are given")
	addListenerTLSFlags(f, &cfg.TLS)
	f.StringSliceVar(&proxies, "trusted-proxies", nil, "CIDRs of the load balancers whose X-Forwarded-For the audit log believes, comma-separated")
	f.StringVar(&cfg.TLS.CAFile, "tls-ca-file", "", "CA bundle (PEM) the other services' and the node agents' certificates chain to: call --quota-server, --workload-server and the agents over TLS")
	f.StringVar(&cfg.AgentServerName, "tls-agent-server-name", "", "with --tls-ca-file: the name every node agent's certificate must carry (default: the host of each agent's advertised address)")
	f.StringVar(&cfg.QuotaServer, "quota-server", "", "the QuotaService's address (required by the workload service)")
	f.StringVar(&cfg.CredentialsKeyFile, "credentials-key-file", "", "workload service: the key file (mode 0600) that seals credentials' values in etcd, one \"ID BASE64\" key a line, newest last (runway admin credentials add-key); without it no credential can be created or used")
	f.BoolVar(&cfg.NotificationEgress.AllowPrivate, "notification-allow-private", false, "workload service: let notification webhooks and SMTP servers be on private and link-local addresses (10/8, 172.16/12, 192.168/16, fc00::/7, 169.254/16, ...); refused by default")
	f.BoolVar(&cfg.NotificationEgress.AllowLoopback, "notification-allow-loopback", false, "workload service: let notification webhooks and SMTP servers be on loopback (the server's own host); refused by default")
	f.StringVar(&cfg.NotificationCAFile, "notification-ca-file", "", "workload service: CA bundle (PEM) that https webhooks' and SMTP servers' certificates are checked against (default: the system's)")
	f.StringVar(&cfg.Replica, "replica", "", "the scheduler replica's name in the election (default: the host name)")
	f.DurationVar(&cfg.NodeLostGrace, "node-lost-grace", 0, "scheduler: how long a node whose agent's lease expired, or a NotReady Kubernetes node, keeps its pods before they are lost (NODE_LOST); 0 is the default, "+server.DefaultNodeLostGrace.String()+" ("+server.DefaultKubeNodeLostGrace.String()+" with --runtime kubernetes, Kubernetes' not-ready toleration); negative is none")
	f.StringVar(&cfg.Runtime, "runtime", server.RuntimeLocal, "where the scheduler's pods run: local (node agents) or kubernetes (pods, run by the leader)")
	f.StringVar(&cfg.Kube.Kubeconfig, "kubeconfig", "", "kubeconfig of the cluster for --runtime kubernetes (default: the in-cluster config)")
	f.StringVar(&cfg.Kube.Namespace, "namespace", "", "Runway's namespace for --runtime kubernetes, of its GPU reservation pods (default runway); workloads' pods run in their projects' namespaces, runway-PROJECT")
	f.StringSliceVar(&cfg.Kube.Tolerations, "tolerate", nil, "taints the pods of --runtime kubernetes tolerate on every node, KEY[=VALUE][:EFFECT] comma-separated, beside their node pool's tolerations (a node with a NoSchedule or NoExecute taint neither tolerates is drained)")
	f.BoolVar(&cfg.Kube.AgentTokenReview, "agent-token-review", false, "nodemanager without --runtime kubernetes, its node agents on a Kubernetes cluster: give each agent its Runway token (IssueNodeAgentToken) for its service account token bound to its pod, reviewed with the in-cluster client (or --kubeconfig)")
	f.StringVar(&cfg.Kube.AgentServiceAccount, "agent-service-account", "", "nodemanager with --runtime kubernetes: the node agents' service account, NAMESPACE/NAME; a node's mark key goes only to its token bound to a pod on that node (default: --namespace's runway-agent)")
	f.StringVar(&cfg.Kube.ReservationImage, "reservation-image", "", "image of the pods that reserve the GPUs holding fractions for --runtime kubernetes (default: Runway's own image)")
	f.Float32Var(&cfg.Kube.QPS, "kube-api-qps", server.DefaultKubeQPS, "requests per second to the Kubernetes apiserver for --runtime kubernetes")
	f.IntVar(&cfg.Kube.Burst, "kube-api-burst", server.DefaultKubeBurst, "burst of requests to the Kubernetes apiserver for --runtime kubernetes")
	f.IntVar(&cfg.Kube.Workers, "kube-workers", server.DefaultKubeWorkers, "pods, bindings and nodes the Kubernetes runtime handles at once")
	f.StringVar(&cfg.Kube.WebhookListen, "kube-webhook-listen", "", "serve the admission webhook that gives users' GPU-fraction pods their GPU ConfigMap (POST /mutate-pods, TLS) on ADDR, with --runtime kubernetes")
	f.StringVar(&cfg.Kube.WebhookCertFile, "kube-webhook-cert-file", "", "certificate (PEM) of --kube-webhook-listen")
	f.StringVar(&cfg.Kube.WebhookKeyFile, "kube-webhook-key-file", "", "key (PEM) of --kube-webhook-cert-file")
	f.StringVar(&cfg.WorkloadServer, "workload-server", "", "the WorkloadService's address (required by --runtime kubernetes: users' pods become workloads there)")
	f.StringVar(&openapi, "openapi", server.DefaultOpenAPIPath, "OpenAPI document to serve as /openapi.json")
	oidc.add(f)
	f.StringVar(&cfg.PrometheusURL, "prometheus-url", "", "the Prometheus-compatible server the metrics service reads history from (required by it)")
	f.DurationVar(&cfg.HistoryInterval, "history-interval", history.DefaultInterval, "that server's scrape interval: rate() windows span several; consumption reports integrate over the samples' own timestamps and use it only for a series of one sample")
	f.StringVar(&cfg.BlobDir, "blob-dir", "", "directory of the consumption reports' CSVs (the metrics service needs it or --blob-s3-endpoint)")
	f.StringVar(&cfg.BlobS3.Endpoint, "blob-s3-endpoint", "", "URL (https://HOST[:PORT]) of the S3-compatible store that keeps the consumption reports' CSVs; http only to loopback")
	f.StringVar(&cfg.BlobS3.Bucket, "blob-s3-bucket", "runway-reports", "that store's bucket (it must exist)")
	f.StringVar(&cfg.BlobS3.Region, "blob-s3-region", "us-east-1", "that bucket's region")
	f.StringVar(&cfg.BlobS3.AccessKeyFile, "blob-s3-access-key-file", "", "file holding the store's access key (default: $AWS_ACCESS_KEY_ID)")
	f.StringVar(&cfg.BlobS3.SecretKeyFile, "blob-s3-secret-key-file", "", "file holding the store's secret key (default: $AWS_SECRET_ACCESS_KEY)")
	f.StringVar(&cfg.BlobS3.CAFile, "blob-s3-ca-file", "", "CA bundle (PEM) the store's certificate chains to (default: the system's roots)")
	mf.add(f, "serve Prometheus metrics on ADDR/metrics, apart from the API (default: not served)")
	_ = cmd.MarkFlagRequired("etcd-endpoints")
	return cmd
}
