package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/gpu"
	"github.com/runwayhq/runway/pkg/gpumetrics"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/container"
	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/services/nodemanager"
)

// Defaults for zero Config fields.
const (
	DefaultLeaseTTL = 10 * time.Second
	Version         = "dev"
)

// Config is one agent.
type Config struct {
	// Node is the node id, 1-63 of [a-z0-9-]. Required.
	Node string
	// Pool is the node pool id; when empty the node manager picks the pool
	// whose selector Labels match (else the default pool).
	Pool string
	// Labels are reported as Node.labels.
	Labels map[string]string
	// Backend lists the GPUs. Required.
	Backend gpu.Backend
	// Client is the etcd client. Required.
	Client *clientv3.Client
	// DataDir is the agent's own: the pods' logs and records, never
	// readable by pods. Required.
	DataDir string
	// WorkDir holds the pods' working directories, outside DataDir;
	// empty is pkg/runner/local's default (under os.TempDir()).
	WorkDir string
	// User is the account pods run as when the agent is root and PodUIDs
	// is zero (local.DefaultUser when empty); PodUIDs, when set, gives
	// each running pod a uid of its own instead.
	User    string
	PodUIDs local.UIDRange
	// Hide are paths the process runtime's pods never see (the agent's key
	// files and credentials' directories: local.Config.Hide); DataDir is
	// always hidden. The container runtime mounts none of them.
	Hide []string
	// Cgroup is the cgroup v2 directory of the pods' cgroups: empty
	// detects one, "none" follows pods by session (pkg/runner/local).
	Cgroup string
	// Engine is the Docker Engine API (DOCKER_HOST form) on which pods
	// run as containers of their images (pkg/runner/container); empty
	// runs them as local processes (pkg/runner/local).
	Engine string
	// LeaseTTL is the node lease's TTL: how long a dead agent's node
	// stays registered. DefaultLeaseTTL when 0; etcd rounds up to 1 s.
	LeaseTTL time.Duration
	// StopGrace is the SIGTERM-to-SIGKILL grace of stopped pods;
	// local.DefaultStopGrace when 0.
	StopGrace time.Duration
	// MilliCPU and MemoryBytes override the machine's CPU (runtime.NumCPU)
	// and memory (/proc/meminfo) in the node's capacity.
	MilliCPU, MemoryBytes int64
	// SampleInterval is how often the GPUs are sampled (memory slices,
	// utilisation, idle time) and the time-slicing plans recomputed;
	// DefaultSampleInterval when 0.
	SampleInterval time.Duration
	// IdleWindow is the window of GPU idle time: gpumetrics.Window (30 s)
	// when 0; only tests shorten it.
	IdleWindow time.Duration
	// CollectInterval is how often finished pods whose workload is gone
	// are removed from the node; DefaultCollectInterval when 0.
	CollectInterval time.Duration
	// Metrics receives the GPU series; none are exported when nil.
	Metrics *gpumetrics.Metrics
	// Usage receives the pods' CPU and memory series; none are exported
	// when nil.
	Usage *PodUsage
	// Restarts counts, by node, the pods started again because they died
	// while their agent was down (NewRestarts); none when nil.
	Restarts *prometheus.CounterVec
	// MPSPipeDir is the pipe directory of an MPS control daemon; when set,
	// pods get MPS memory and thread limits instead of being ended by the
	// agent for going over their memory slice.
	MPSPipeDir string
	// Credentials opens the credentials of the pods bound to this node (the
	// workload service's CredentialService, called with the node's own
	// service token: auth.Guard.NodeAgentCredentials); nil: a pod that
	// names a credential fails to start, saying so.
	Credentials workloadv1.CredentialServiceClient
	// Listen is the address of the agent's NodeAgentService (pod output).
	// Empty serves nothing.
	Listen string
	// AdvertiseAddress is the node's agent_address, where the workload
	// service reaches the agent: a host or host:port (the listener's port
	// when missing). Empty: the listener's address, with the host name for
	// a listener on every interface.
	AdvertiseAddress string
	// TLS, when set, serves Listen over TLS only (grpcserver.LoadTLS; with
	// client CAs, mutual TLS: the workload service presents its
	// certificate). Nil serves plaintext, for loopback (`runway dev`).
	TLS *tls.Config
	// Auth and AuthStream check the callers of the NodeAgentService
	// (pkg/auth's guard); nil serves it to anyone.
	Auth       grpc.UnaryServerInterceptor
	AuthStream grpc.StreamServerInterceptor
	// Kube, when set, runs the agent in Kubernetes mode (KubeMode): the
	// kubelet runs the pods, the agent holds the Runway pods on its node
	// to their GPU memory slices and time-slicing plans and reports their
	// GPU metrics and idle time; it registers no node and runs nothing.
	// DataDir and the runtime fields are not used; Listen serves the
	// kubelet's log files of those pods.
	Kube *KubeMode
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// Run registers the node and runs its bound pods until ctx is done. It
// returns ctx's error, or an error if the configuration is invalid or the
// devices cannot be read.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	if cfg.Kube != nil {
		return runKube(ctx, cfg)
	}
	node, devices, err := cfg.node()
	if err != nil {
		return err
	}
	r, err := cfg.runner(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	cfg.Logger.Info("node agent: pods run "+r.Describe(), "node", cfg.Node)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	running := &runningPods{}
	served := make(chan error, 1)
	if cfg.Listen != "" {
		srv, addr, err := cfg.listen(&logServer{client: cfg.Client, find: runnerLogs(r, running)})
		if err != nil {
			return err
		}
		node.AgentAddress = addr
		go func() { served <- srv.Serve(ctx) }()
	} else {
		served <- nil
	}
	health := make(chan map[int]string, 1)
	registered := make(chan error, 1)
	go func() { registered <- cfg.keepRegistered(ctx, node, health) }()
	log := cfg.Logger.With("node", cfg.Node)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if w, ok := cfg.Backend.(interface{ WatchHealth(context.Context) error }); ok {
			if err := w.WatchHealth(ctx); err != nil {
				log.Warn("GPU health not watched", "err", err)
			}
		}
	}()
	g := newGPUManager(cfg, devices, runnerCPU(r), log)
	g.health = health
	sampled := make(chan struct{})
	go func() { defer close(sampled); g.run(ctx) }()
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		(&collector{cfg: cfg, runner: r, dir: cfg.DataDir}).run(ctx)
	}()
	rp := newReporter(cfg.Client, log)
	rctx, stopReports := context.WithCancel(context.WithoutCancel(ctx))
	reported := make(chan struct{})
	go func() { defer close(reported); rp.run(rctx) }()
	p := &pods{cfg: cfg, runner: r, gpus: g, log: log, running: running, reporter: rp}
	err = p.run(ctx)
	cancel()
	<-sampled
	<-collected
	<-watched
	stopReports() // after the pods' last reports: it tries them once more
	<-reported
	if rerr := <-registered; err == nil {
		err = rerr
	}
	if serr := <-served; err == nil {
		err = serr
	}
	return err
}

// NewRestarts is the counter of Config.Restarts, to be registered once
// for every agent of a process.
func NewRestarts() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "runway_agent_pod_restarts_total",
		Help: "Pods the node agent started again for the same binding because they died while no agent ran (killed with it, the node restarted)."},
		[]string{"node"})
}

// listen serves the NodeAgentService (pod output) on cfg.Listen, and says
// at which address the workload service reaches it.
func (cfg *Config) listen(ls *logServer) (*grpcserver.Server, string, error) {
	srv, err := grpcserver.New(grpcserver.Config{Listen: cfg.Listen, Logger: cfg.Logger, ShutdownTimeout: time.Second,
		Auth: cfg.Auth, AuthStream: cfg.AuthStream, TLS: cfg.TLS})
	if err != nil {
		return nil, "", fmt.Errorf("agent: %w", err)
	}
	srv.Register(func(g *grpc.Server) { nodemanagerv1.RegisterNodeAgentServiceServer(g, ls) })
	addr, err := advertised(cfg.AdvertiseAddress, srv.Addr())
	if err != nil {
		_ = srv.Close()
		return nil, "", fmt.Errorf("agent: %w", err)
	}
	return srv, addr, nil
}

// runner is the pods' runtime: containers on cfg.Engine, else local
// processes.
func (cfg *Config) runner(ctx context.Context) (runner.Runner, error) {
	if cfg.Engine != "" {
		return container.New(ctx, container.Config{Host: cfg.Engine, DataDir: cfg.DataDir, WorkDir: cfg.WorkDir, StopGrace: cfg.StopGrace})
	}
	return local.New(local.Config{DataDir: cfg.DataDir, WorkDir: cfg.WorkDir, User: cfg.User, UIDs: cfg.PodUIDs,
		Cgroup: cfg.Cgroup, StopGrace: cfg.StopGrace, Hide: cfg.Hide})
}

func (cfg *Config) check() error {
	switch {
	case !nodemanager.ValidNodeID(cfg.Node):
		return fmt.Errorf("agent: node id %q must be 1-63 characters of [a-z0-9-]", cfg.Node)
	case cfg.Backend == nil:
		return errors.New("agent: Config.Backend is nil")
	case cfg.Client == nil:
		return errors.New("agent: Config.Client is nil")
	case cfg.DataDir == "" && cfg.Kube == nil:
		return errors.New("agent: Config.DataDir is empty")
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = DefaultSampleInterval
	}
	if cfg.CollectInterval <= 0 {
		cfg.CollectInterval = DefaultCollectInterval
	}
	return nil
}

// node builds the Node the agent registers: capacity from the backend
// (MIG-enabled devices are reported but not counted) and the machine;
// allocatable equals capacity (no system reservation yet).
func (cfg *Config) node() (*nodemanagerv1.Node, []gpu.DeviceInfo, error) {
	devs, err := cfg.Backend.Devices()
	if err != nil {
		return nil, nil, fmt.Errorf("agent: read GPUs: %w", err)
	}
	cpu, mem := cfg.MilliCPU, cfg.MemoryBytes
	if cpu == 0 {
		cpu = int64(runtime.NumCPU()) * 1000
	}
	if mem == 0 {
		mem = machineMemory()
	}
	capacity := &commonv1.ResourceQuantity{MilliCpu: cpu, MemoryBytes: mem}
	n := &nodemanagerv1.Node{
		Name:             nodemanager.NodeName(cfg.Node),
		NodePool:         poolName(cfg.Pool),
		Labels:           cfg.Labels,
		Readiness:        nodemanagerv1.Readiness_READINESS_READY,
		ReadinessMessage: fmt.Sprintf("%d GPU(s) found.", len(devs)),
		AgentVersion:     Version,
	}
	for _, d := range devs {
		mig := nodemanagerv1.MigMode_MIG_MODE_DISABLED
		if d.MIG {
			mig = nodemanagerv1.MigMode_MIG_MODE_ENABLED
		} else {
			capacity.MilliGpus += 1000
		}
		n.Devices = append(n.Devices, &nodemanagerv1.GpuDevice{
			Index: int32(d.Index), Uuid: d.UUID, Model: d.Model, MemoryBytes: d.MemoryBytes,
			MigMode: mig, Healthy: true,
		})
	}
	n.Capacity, n.Allocatable = capacity, capacity
	return n, devs, nil
}

// machineMemory reads MemTotal from /proc/meminfo; 0 when unknown.
func machineMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, _ := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// keepRegistered registers the node under a fresh lease and keeps the
// lease alive; when the lease is lost (expired during a partition, or
// revoked) it registers again with a new uid, as the proto says. The
// devices' health (unhealthy devices by index, from health) is written
// into the node key as it changes.
func (cfg *Config) keepRegistered(ctx context.Context, node *nodemanagerv1.Node, health <-chan map[int]string) error {
	log := cfg.Logger.With("node", cfg.Node)
	backoff := 100 * time.Millisecond
	for {
		err := cfg.registerOnce(ctx, node, health)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("node registration lost; registering again", "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (cfg *Config) registerOnce(ctx context.Context, tmpl *nodemanagerv1.Node, health <-chan map[int]string) error {
	ttl := int64((cfg.LeaseTTL + time.Second - 1) / time.Second)
	lease, err := cfg.Client.Grant(ctx, ttl)
	if err != nil {
		return err
	}
	n := proto.Clone(tmpl).(*nodemanagerv1.Node)
	now := timestamppb.Now()
	n.Uid, n.CreateTime, n.UpdateTime = nodemanager.NewUID(), now, now
	n.ReadinessChangeTime, n.HeartbeatTime = now, now
	if err := nodemanager.RegisterNode(ctx, cfg.Client, n, lease.ID); err != nil {
		return err
	}
	alive, err := cfg.Client.KeepAlive(ctx, lease.ID)
	if err != nil {
		return err
	}
	for {
		select {
		case _, ok := <-alive:
			if !ok { // the lease is lost or ctx is done
				return errors.New("lease keep-alive ended")
			}
		case bad := <-health:
			setHealth(tmpl, bad)
			setHealth(n, bad)
			n.UpdateTime = timestamppb.Now()
			if err := nodemanager.RegisterNode(ctx, cfg.Client, n, lease.ID); err != nil {
				return fmt.Errorf("update the devices' health: %w", err)
			}
			cfg.Logger.Warn("GPU health changed", "node", cfg.Node, "unhealthy", bad)
		}
	}
}

// setHealth marks the node's devices healthy but those in bad (by index,
// with why), and says so in the readiness message.
func setHealth(n *nodemanagerv1.Node, bad map[int]string) {
	for _, d := range n.GetDevices() {
		why, sick := bad[int(d.GetIndex())]
		d.Healthy, d.HealthMessage = !sick, why
	}
	n.ReadinessMessage = fmt.Sprintf("%d GPU(s) found.", len(n.GetDevices()))
	if len(bad) > 0 {
		n.ReadinessMessage += fmt.Sprintf(" %d unhealthy.", len(bad))
	}
}

// poolName is the pool's resource name, "" to let the node manager choose.
func poolName(id string) string {
	if id == "" {
		return ""
	}
	return "nodepools/" + id
}
