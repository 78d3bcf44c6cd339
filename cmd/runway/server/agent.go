package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"google.golang.org/grpc"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/gpu"
	"github.com/runwayhq/runway/pkg/gpu/nvidia"
	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/pkg/gpumetrics"
	"github.com/runwayhq/runway/pkg/metrics"
	"github.com/runwayhq/runway/pkg/runner/container"
	"github.com/runwayhq/runway/pkg/runner/kubelet"
	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/services/nodemanager/agent"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// GPU backends an agent can use (AgentConfig.GPUBackend).
const (
	BackendAuto      = "auto"      // NVML when the driver library loads, else simulated
	BackendNVML      = "nvml"      // NVML or fail
	BackendSimulated = "simulated" // AgentConfig.GPUs simulated devices
)

// Pod runtimes (AgentConfig.Runtime, DevConfig.Runtime).
const (
	RuntimeAuto      = "auto"      // containers when root and an engine answers, else processes
	RuntimeContainer = "container" // containers on the engine Find gives, or fail
	RuntimeProcess   = "process"   // host processes (pkg/runner/local)
)

// ResolveRuntime turns a runtime (RuntimeAuto when empty) into the
// engine to run containers on: "" for host processes.
func ResolveRuntime(ctx context.Context, runtime string) (string, error) {
	switch runtime {
	case RuntimeProcess:
		return "", nil
	case RuntimeContainer:
		host, err := container.Find(ctx)
		if err != nil {
			return "", fmt.Errorf("--runtime container: %w", err)
		}
		return host, nil
	case "", RuntimeAuto:
		if os.Geteuid() != 0 { // the container runtime needs root (its network guard)
			return "", nil
		}
		host, _ := container.Find(ctx)
		return host, nil
	}
	return "", fmt.Errorf("--runtime %q: want auto, container or process", runtime)
}

// AgentConfig is one node agent (`runway agent`).
type AgentConfig struct {
	// Node is the node id. Required.
	Node string
	// EtcdEndpoints are the etcd client endpoints. Required.
	EtcdEndpoints []string
	// EtcdTLS, when set, connects to etcd over TLS.
	EtcdTLS EtcdTLS
	// GPUBackend is BackendAuto (when empty), BackendNVML or
	// BackendSimulated.
	GPUBackend string
	// GPUs is the number of simulated GPUs, when they are simulated.
	GPUs int
	// Pool is the node pool id; when empty the node manager picks the pool
	// whose selector Labels match (else the default pool).
	Pool string
	// Labels are the node's labels (run.ai/type for node types, pool selectors).
	Labels map[string]string
	// DataDir holds the agent's records and the pods' logs. Required.
	DataDir string
	// WorkDir holds the pods' working directories (agent.Config.WorkDir).
	WorkDir string
	// RunAsUser and PodUIDs are who pods run as when the agent is root
	// (agent.Config.User, PodUIDs).
	RunAsUser string
	PodUIDs   string
	// HideFromPods are more paths the process runtime's pods never see
	// (the chart's credentials' directories); the agent's own key and
	// token files are hidden whatever it says (agentHidden).
	HideFromPods []string
	// Listen is the agent's own address (pod output for the workload
	// service); it must be reachable from the control plane.
	Listen string
	// AdvertiseAddress is what the node registers as its agent's address
	// (agent.Config.AdvertiseAddress).
	AdvertiseAddress string
	// TLS, when its certificate files are set, serves Listen over TLS only;
	// with ClientCAFile, mutual TLS (the workload service presents its
	// certificate). CAFile, when set, is what NodeManagerServer's and
	// WorkloadServer's certificates must chain to: calls go over TLS
	// (plaintext without it).
	TLS ServerTLS
	// WorkloadServer is the WorkloadService's address, where the agent
	// opens the credentials of its pods (as its node's own principal);
	// empty: pods that name credentials fail to start.
	WorkloadServer string
	// MetricsListen is the address of the Prometheus /metrics endpoint; none
	// when empty. One that is not loopback needs MetricsTokenFile: the
	// series name the projects and workloads of the node's pods.
	MetricsListen    string
	MetricsTokenFile string
	// MetricsTLS is that endpoint's TLS (MetricsConfig.TLS): by default
	// TLS's files.
	MetricsTLS ServerTLS
	// MPSPipeDir is the pipe directory of an MPS control daemon (see
	// agent.Config.MPSPipeDir); empty when there is none.
	MPSPipeDir string
	// Runtime is RuntimeAuto (when empty), RuntimeContainer or
	// RuntimeProcess (ResolveRuntime), or RuntimeKubernetes: the agent of
	// a Kubernetes node (agent.KubeMode), where Node is the Kubernetes
	// node's name and the pods are the kubelet's.
	Runtime string
	// Kubeconfig is the Kubernetes client's kubeconfig file
	// (RuntimeKubernetes); empty: the in-cluster config.
	Kubeconfig string
	// KubeNamespace is Runway's workload namespace (RuntimeKubernetes;
	// kube.DefaultNamespace when empty).
	KubeNamespace string
	// ProcRoot and CgroupRoot are where the host's processes and cgroups
	// are seen (RuntimeKubernetes; /proc and /sys/fs/cgroup when empty).
	ProcRoot, CgroupRoot string
	// LogRoot is the kubelet's pod log directory (RuntimeKubernetes;
	// agent.DefaultLogRoot when empty).
	LogRoot string
	// PodResources is the kubelet's pod-resources socket
	// (RuntimeKubernetes; kubelet.DefaultPodResources when empty).
	PodResources string
	// NodeManagerServer is the NodeManagerService's address, where the
	// agent gets its node's mark key (RuntimeKubernetes; required there),
	// presenting the service account token in KubeTokenFile
	// (DefaultKubeTokenFile when empty): one of kube.DefaultNodeKeyAudience
	// bound to the agent's pod, read again at each call (the kubelet
	// rotates it).
	NodeManagerServer, KubeTokenFile string
	// AgentTokenFile holds the node agent's Runway token (runway admin
	// node-token), for an agent outside Kubernetes that opens credentials
	// (WorkloadServer); read at each call.
	AgentTokenFile string
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// RunAgent connects to etcd and runs the agent until ctx ends; it returns
// nil then, or the agent's error.
func RunAgent(ctx context.Context, cfg AgentConfig) error {
	if cfg.DataDir == "" && cfg.Runtime != RuntimeKubernetes {
		return errors.New("--data-dir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	uids, err := local.ParseUIDRange(cfg.PodUIDs)
	if err != nil {
		return fmt.Errorf("--pod-uids: %w", err)
	}
	listenTLS, err := cfg.TLS.serverTLS(cfg.Listen, cfg.Logger)
	if err != nil {
		return err
	}
	var km *agent.KubeMode
	engine := ""
	if cfg.Runtime == RuntimeKubernetes {
		if km, err = kubeMode(cfg); err != nil {
			return err
		}
		conn, err := cfg.dialNodeManager()
		if err != nil {
			return err
		}
		defer conn.Close()
		km.NodeManager = nodemanagerv1.NewNodeManagerServiceClient(conn)
		cfg.Node = kube.NodeID(km.NodeName)
		if cfg.Node == "" {
			return fmt.Errorf("--node %q: not a Kubernetes node name Runway can use", km.NodeName)
		}
	} else if engine, err = ResolveRuntime(ctx, cfg.Runtime); err != nil {
		return err
	}
	backend, closeBackend, err := openBackend(cfg)
	if err != nil {
		return err
	}
	defer closeBackend()
	cli, err := newEtcdClient(cfg.EtcdEndpoints, cfg.EtcdTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	acfg := agent.Config{Node: cfg.Node, Pool: cfg.Pool, Labels: cfg.Labels, Client: cli, DataDir: cfg.DataDir, Listen: cfg.Listen,
		WorkDir: cfg.WorkDir, User: cfg.RunAsUser, PodUIDs: uids, Hide: agentHidden(cfg), AdvertiseAddress: cfg.AdvertiseAddress,
		Backend: backend, MPSPipeDir: cfg.MPSPipeDir, Engine: engine, TLS: listenTLS, Logger: cfg.Logger, Kube: km}
	var ops *metrics.Ops
	if cfg.MetricsListen != "" {
		reg, err := metrics.NewRegistry()
		if err != nil {
			return err
		}
		if acfg.Metrics, err = gpumetrics.NewMetrics(reg); err != nil {
			return err
		}
		acfg.Usage, acfg.Restarts = agent.NewPodUsage(), agent.NewRestarts()
		if err := errors.Join(reg.Register(acfg.Usage), reg.Register(acfg.Restarts)); err != nil {
			return err
		}
		if ops, err = (MetricsConfig{Listen: cfg.MetricsListen, TokenFile: cfg.MetricsTokenFile, TLS: cfg.MetricsTLS}).withAPI(cfg.TLS).listen(reg, cfg.Logger, nil); err != nil {
			return err
		}
		defer ops.Close()
	}
	// The agent's NodeAgentService (pod output) admits the workload
	// service's token, checked with the verifying keys alone: the agent
	// holds nothing that signs a token.
	gate, err := auth.NewAgentGate(ctx, cli, nil, "services/"+Workload)
	if err != nil {
		return fmt.Errorf("the verifying keys: %w", err)
	}
	acfg.Auth, acfg.AuthStream = gate.UnaryInterceptor, gate.StreamInterceptor
	if cfg.WorkloadServer != "" {
		peerTLS, err := cfg.TLS.clientTLS()
		if err != nil {
			return err
		}
		creds, closeCreds, err := cfg.agentCredentials()
		if err != nil {
			return err
		}
		defer closeCreds()
		conn, err := dialServiceAs(cfg.WorkloadServer, creds, nil, peerTLS)
		if err != nil {
			return err
		}
		defer conn.Close()
		acfg.Credentials = workloadv1.NewCredentialServiceClient(conn)
	}
	g := newGroup(ctx)
	g.Go("verifying keys", gate.Run)
	g.Go("agent", func(ctx context.Context) error { return agent.Run(ctx, acfg) })
	if ops != nil {
		g.Go("metrics", ops.Serve)
	}
	return g.Wait()
}

// DefaultKubeTokenFile is where the chart projects the agent's service
// account token for the NodeManagerService (AgentConfig.KubeTokenFile).
const DefaultKubeTokenFile = "/var/run/secrets/runway/token"

// dialNodeManager is the agent's connection to the NodeManagerService,
// over TLS when TLS.CAFile is set, carrying its service account token.
func (cfg AgentConfig) dialNodeManager() (*grpc.ClientConn, error) {
	if cfg.NodeManagerServer == "" {
		return nil, errors.New("--runtime kubernetes needs --nodemanager-server (the node's mark key comes from there)")
	}
	tc, err := cfg.TLS.clientTLS()
	if err != nil {
		return nil, err
	}
	if tc == nil && !metrics.Loopback(cfg.NodeManagerServer) {
		cfg.Logger.Warn("calling the NodeManagerService in plaintext: its answer is the node's key; set --tls-ca-file on any network but loopback",
			"addr", cfg.NodeManagerServer)
	}
	return dialServiceAs(cfg.NodeManagerServer, tokenFile{cmp.Or(cfg.KubeTokenFile, DefaultKubeTokenFile), "the agent's service account token"}, nil, tc)
}

// tokenFile are per-call credentials read from a file at each call (a
// projected service account token, which the kubelet rotates; a node
// agent's token, replaced before it expires); what names the file in
// errors.
type tokenFile struct{ path, what string }

func (f tokenFile) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.what, err)
	}
	return map[string]string{"authorization": "Bearer " + strings.TrimSpace(string(b))}, nil
}

// RequireTransportSecurity is false: on loopback (tests) there is no TLS;
// the dialers warn about plaintext elsewhere.
func (tokenFile) RequireTransportSecurity() bool { return false }

// agentHidden is what the agent's pods must never see: its private keys
// and tokens, and HideFromPods.
func agentHidden(cfg AgentConfig) []string {
	return append([]string{cfg.EtcdTLS.KeyFile, cfg.TLS.KeyFile, cfg.MetricsTokenFile, cfg.AgentTokenFile, cfg.KubeTokenFile}, cfg.HideFromPods...)
}

// kubeMode is the Kubernetes mode of the agent of node cfg.Node.
func kubeMode(cfg AgentConfig) (*agent.KubeMode, error) {
	cs, err := kubeClient(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return &agent.KubeMode{Client: cs, NodeName: cfg.Node, Namespace: cfg.KubeNamespace,
		Procs: kubelet.Config{ProcRoot: cfg.ProcRoot, CgroupRoot: cfg.CgroupRoot}, LogRoot: cfg.LogRoot,
		PodResources: cfg.PodResources}, nil
}

// openBackend picks the GPU backend, saying in the log when auto falls
// back to simulated devices.
func openBackend(cfg AgentConfig) (gpu.Backend, func(), error) {
	sim := func() (gpu.Backend, func(), error) {
		return simulated.New(simulated.Config{Count: cfg.GPUs, Node: cfg.Node}), func() {}, nil
	}
	switch cfg.GPUBackend {
	case BackendSimulated:
		return sim()
	case BackendNVML:
		return nvidia.Load()
	case "", BackendAuto:
		b, closeFn, err := nvidia.Load()
		if err == nil {
			cfg.Logger.Info("GPUs: NVML")
			return b, closeFn, nil
		}
		cfg.Logger.Warn("GPUs: NVML unavailable; using simulated GPUs", "err", err, "gpus", cfg.GPUs)
		return sim()
	}
	return nil, nil, fmt.Errorf("--gpu-backend %q: want auto, nvml or simulated", cfg.GPUBackend)
}
