package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/runwayhq/runway/cmd/runway/server"
	"github.com/runwayhq/runway/pkg/runner/local"
)

func agentCommand() *cobra.Command {
	var cfg server.AgentConfig
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node agent: register the node and run the pods bound to it",
		Long: `Run the node agent of one node: it registers the node in etcd under a lease,
runs the pods the scheduler binds to it (under --data-dir) and reports their
state. Its GPUs come from NVML when the NVIDIA driver library loads, else
they are simulated (--gpus), which it says in its log; --gpu-backend forces
either. It holds each pod to its GPU memory slice, enforces its node pool's
time-slicing plan, and reports each pod's GPU idle time. With --metrics-listen
it serves Prometheus metrics on ADDR/metrics: runway_gpu_utilization,
runway_gpu_memory_used_bytes, runway_gpu_idle_seconds_per_workload, and each
pod's runway_pod_cpu_seconds_total and runway_pod_memory_bytes; an address
that is not loopback needs --metrics-token-file. With --tls-cert-file it
serves HTTPS only, with the same certificate and client CA (or
--metrics-tls-cert-file, --metrics-tls-key-file, --metrics-tls-client-ca-file).

--runtime picks how pods run (services/nodemanager/README.md says what
isolation each gives). "container": each pod is a container of its image on a
Docker Engine API (dockerd, or podman's API service), found as the docker CLI
finds it: DOCKER_HOST, else /var/run/docker.sock, else podman's
/run/podman/podman.sock or $XDG_RUNTIME_DIR/podman/podman.sock; labelled with
its project, workload and pod, the workload's CPU and memory as its limits, its
GPUs by CDI name (nvidia.com/gpu=UUID) with NVML; containers outlive the agent
and are adopted by the next one. "process": pods run as host processes: as
root, each as an unprivileged uid of its own (--pod-uids), with only the
RUNWAY_* variables, the workload's env and a minimal PATH/HOME, in a working
directory under --work-dir, every descendant followed by a cgroup of its own
where cgroup v2 is writable (else by session). "auto" (the default):
containers when an engine answers, else processes. "kubernetes": the agent of
a Kubernetes node, run by the chart's DaemonSet where the scheduler runs the
Kubernetes runtime: --node is the Kubernetes node's name, the kubelet runs the
pods and the runtime registers the node and reports the pods' phases; the
agent finds the processes of the Runway pods on its node (--namespace) by
their cgroup (--proc-root, --cgroup-root: the host's, with hostPID), kills a
pod over its GPU memory slice and annotates it with why, freezes and thaws
pods' cgroups for time-slicing, exports the GPU metrics and idle time, and
serves the kubelet's log files (--log-root) on --listen as the pods' output;
it needs no --data-dir. It checks the marks on those pods and signs its
findings with its own node's key, which --nodemanager-server gives it for
its service account token bound to its pod (--kube-token-file; over TLS
with --tls-ca-file): it never holds the key they come from, nor another
node's.

With --tls-cert-file and --tls-key-file it serves --listen over TLS only, and
with --tls-client-ca-file only to callers presenting a certificate of that CA
(mutual TLS); the workload service reaches it over TLS with runway serve
workload --tls-ca-file (and --tls-agent-server-name when every agent carries
one certificate name).

It runs until SIGINT or SIGTERM; it stops its pods then, and the node expires
with its lease.`,
		Example: `  runway agent --node gpu-1 --etcd-endpoints 127.0.0.1:2379 --data-dir /var/lib/runway --metrics-listen :9400
  runway agent --node gpu-1 --etcd-endpoints 127.0.0.1:2379 --data-dir /var/lib/runway --listen :7072 \
    --tls-cert-file agent.crt --tls-key-file agent.key --tls-client-ca-file ca.crt
  runway agent --node sim-1 --etcd-endpoints 127.0.0.1:2379 --gpu-backend simulated --gpus 8 --data-dir /tmp/sim-1
  runway agent --runtime kubernetes --node "$NODE_NAME" --namespace runway-workloads --etcd-endpoints etcd:2379 \
    --nodemanager-server nodemanager:7070 --tls-ca-file ca.crt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := untilSignal(cmd.Context())
			defer stop()
			return server.RunAgent(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Node, "node", "", "node id, 1-63 characters of [a-z0-9-]; with --runtime kubernetes, the Kubernetes node's name (required)")
	f.StringSliceVar(&cfg.EtcdEndpoints, "etcd-endpoints", nil, "etcd client endpoints, comma-separated (required)")
	f.StringVar(&cfg.EtcdTLS.CAFile, "etcd-ca-file", "", "CA bundle that verifies etcd's certificate (TLS to etcd)")
	f.StringVar(&cfg.EtcdTLS.CertFile, "etcd-cert-file", "", "client certificate for etcd")
	f.StringVar(&cfg.EtcdTLS.KeyFile, "etcd-key-file", "", "client key for etcd")
	f.StringVar(&cfg.GPUBackend, "gpu-backend", server.BackendAuto, "GPUs from: auto (NVML if the driver loads, else simulated), nvml or simulated")
	f.IntVar(&cfg.GPUs, "gpus", 8, "number of simulated GPUs (when simulated)")
	f.StringVar(&cfg.MetricsListen, "metrics-listen", "", "serve Prometheus metrics on ADDR/metrics (for example :9400)")
	f.StringVar(&cfg.MetricsTokenFile, "metrics-token-file", "", "file whose first line is the bearer token GET /metrics requires (required when --metrics-listen is not loopback)")
	addMetricsTLSFlags(f, &cfg.MetricsTLS)
	f.StringVar(&cfg.MPSPipeDir, "mps-pipe-dir", "", "pipe directory of an MPS control daemon: pods get MPS memory and thread limits")
	f.StringVar(&cfg.Pool, "pool", "", "node pool id (default: the pool whose node selector matches --label, else default)")
	f.StringToStringVar(&cfg.Labels, "label", nil, "node label K=V (repeatable): run.ai/type=dgx, or what a pool's node selector matches")
	f.StringVar(&cfg.DataDir, "data-dir", "", "the agent's own directory: pod logs and records, never readable by pods (required)")
	f.StringVar(&cfg.WorkDir, "work-dir", "", "directory of the pods' working directories, outside --data-dir (default $TMPDIR/runway-pods/HASH)")
	f.StringVar(&cfg.Runtime, "runtime", server.RuntimeAuto, "how pods run: auto (containers when a Docker Engine API answers, else host processes), container, process (one machine: a distributed training's pods meet at 127.0.0.1, each on a port of its own), or kubernetes (the kubelet runs them; the agent enforces their GPU slices)")
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "with --runtime kubernetes: kubeconfig file (default: the in-cluster config)")
	f.StringVar(&cfg.KubeNamespace, "namespace", "", "with --runtime kubernetes: Runway's workload namespace (default runway)")
	f.StringVar(&cfg.ProcRoot, "proc-root", "", "with --runtime kubernetes: the host's /proc (default /proc; run with hostPID)")
	f.StringVar(&cfg.CgroupRoot, "cgroup-root", "", "with --runtime kubernetes: the host's cgroup mount (default /sys/fs/cgroup)")
	f.StringVar(&cfg.PodResources, "pod-resources", "", "with --runtime kubernetes: the kubelet's pod-resources socket, which says the GPUs of whole-GPU pods (default /var/lib/kubelet/pod-resources/kubelet.sock)")
	f.StringVar(&cfg.LogRoot, "log-root", "", "with --runtime kubernetes: the kubelet's pod logs, served as the pods' output (default /var/log/pods)")
	f.StringVar(&cfg.RunAsUser, "run-as-user", local.DefaultUser, "when root and --pod-uids is empty, pods run as this unprivileged user")
	f.StringVar(&cfg.PodUIDs, "pod-uids", fmt.Sprintf("%d-%d", local.DefaultUIDs.First, local.DefaultUIDs.Last),
		"when root, each running pod gets a uid and gid of its own from FIRST-LAST (empty: all run as --run-as-user)")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "the agent's address for pod output (runway workload logs); in a cluster, one the workload service can reach")
	f.StringSliceVar(&cfg.HideFromPods, "hide-from-pods", nil,
		"with the process runtime as root: more paths (the credentials' directories) covered in every pod's mount namespace; its own --*-key-file and --metrics-token-file always are")
	addListenerTLSFlags(f, &cfg.TLS)
	f.StringVar(&cfg.NodeManagerServer, "nodemanager-server", "", "the NodeManagerService's address, which gives the agent its node's mark key (with --runtime kubernetes: required) and, for its service account token, its Runway token (for --workload-server without --agent-token-file)")
	f.StringVar(&cfg.KubeTokenFile, "kube-token-file", server.DefaultKubeTokenFile, "the agent's service account token for --nodemanager-server (audience runway-nodemanager, bound to the agent's pod)")
	f.StringVar(&cfg.AgentTokenFile, "agent-token-file", "", "the agent's Runway token (runway admin node-token NODE), for --workload-server outside Kubernetes; read at each call")
	f.StringVar(&cfg.WorkloadServer, "workload-server", "", "the WorkloadService's address, where the agent opens the credentials of the pods bound to its node (with --tls-ca-file, over TLS)")
	f.StringVar(&cfg.TLS.CAFile, "tls-ca-file", "", "CA bundle (PEM) that --nodemanager-server's and --workload-server's certificates chain to: call them over TLS (presenting --tls-cert-file to the workload service)")
	f.StringVar(&cfg.AdvertiseAddress, "advertise-address", "", "HOST or HOST:PORT the workload service reaches the agent at (default: --listen's address; the host name when it listens on every interface)")
	_ = cmd.MarkFlagRequired("node")
	_ = cmd.MarkFlagRequired("etcd-endpoints")
	return cmd
}
