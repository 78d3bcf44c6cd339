package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/services/nodemanager/kube"
	"github.com/runwayhq/runway/services/scheduler"
)

// Runtimes: where bound pods run.
const (
	// RuntimeLocal: node agents (`runway agent`) run them as processes.
	RuntimeLocal = "local"
	// RuntimeKubernetes: the scheduler leader runs them as Kubernetes pods
	// (services/nodemanager/kube).
	RuntimeKubernetes = "kubernetes"
)

// KubeConfig is the Kubernetes runtime of a scheduler.
type KubeConfig struct {
	// Kubeconfig is a kubeconfig file; empty means the in-cluster config
	// (the scheduler runs in a pod).
	Kubeconfig string
	// Namespace is Runway's own, of the GPU reservation pods
	// (kube.DefaultNamespace when empty); workloads' pods run in their
	// projects' namespaces.
	Namespace string
	// DeleteGrace of evicted pods and LeaseTTL of the nodes' registration
	// (the kube package's defaults when 0).
	DeleteGrace, LeaseTTL time.Duration
	// Tolerations of Runway's pods, KEY[=VALUE][:EFFECT] each
	// (kube.ParseToleration).
	Tolerations []string
	// ReservationImage of the GPU reservation pods (kube's default when
	// empty).
	ReservationImage string
	// QPS and Burst limit the client's requests to the apiserver
	// (DefaultKubeQPS and DefaultKubeBurst when 0): client-go's own 5/10
	// would cap the runtime at a few pods a second.
	QPS   float32
	Burst int
	// Workers is how many objects the runtime handles at once
	// (kube.DefaultWorkers when 0).
	Workers int
	// WebhookListen, when set, serves the admission webhook that gives
	// users' fraction pods their GPU ConfigMap's reference
	// (kube.AdmissionHandler, POST /mutate-pods) over TLS with
	// WebhookCertFile and WebhookKeyFile, on every replica.
	WebhookListen, WebhookCertFile, WebhookKeyFile string
	// AgentServiceAccount is the node agents' service account,
	// NAMESPACE/NAME: the NodeManagerService gives a node's mark key only
	// to a token of it bound to a pod on that node (kube.NodeKeys). Empty:
	// Namespace/DefaultAgentServiceAccount.
	AgentServiceAccount string
	// AgentTokenReview has a NodeManagerService without the Kubernetes
	// runtime review its node agents' service account tokens all the same
	// (kube.NodeKeys.Review), to give each its Runway token: agents that
	// run pods themselves on a Kubernetes cluster (the chart's local mode).
	AgentTokenReview bool
}

// DefaultAgentServiceAccount is the node agents' service account's name
// in Runway's namespace when KubeConfig.AgentServiceAccount is empty.
const DefaultAgentServiceAccount = "runway-agent"

// nodeKeys is the NodeManagerService's hand-out of node mark keys to the
// node agents (kube.NodeKeys), reviewing their tokens with the client of
// the kubeconfig.
func (k KubeConfig) nodeKeys(etcd *clientv3.Client) (*kube.NodeKeys, error) {
	sa := k.AgentServiceAccount
	if sa == "" {
		sa = cmp.Or(k.Namespace, kube.DefaultNamespace) + "/" + DefaultAgentServiceAccount
	}
	ns, name, ok := strings.Cut(sa, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("--agent-service-account %q: want NAMESPACE/NAME", sa)
	}
	cs, err := kubeClient(k.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return &kube.NodeKeys{Kube: cs, Etcd: etcd, Namespace: k.Namespace, AgentNamespace: ns, AgentServiceAccount: name}, nil
}

// webhook returns the admission webhook's server, nil when none is
// configured; it listens at once.
func (k KubeConfig) webhook(log *slog.Logger) (func(context.Context) error, error) {
	if k.WebhookListen == "" {
		return nil, nil
	}
	if k.WebhookCertFile == "" || k.WebhookKeyFile == "" {
		return nil, errors.New("--kube-webhook-listen needs --kube-webhook-cert-file and --kube-webhook-key-file (the apiserver calls webhooks over TLS only)")
	}
	cfg, err := grpcserver.LoadTLS(k.WebhookCertFile, k.WebhookKeyFile, "")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", k.WebhookListen)
	if err != nil {
		return nil, fmt.Errorf("--kube-webhook-listen: %w", err)
	}
	return func(ctx context.Context) error { return kube.ServeAdmission(ctx, l, cfg, log) }, nil
}

// The client limits of the Kubernetes runtime by default: two writes per
// pod, and what a large cluster's scheduler is given.
const (
	DefaultKubeQPS     = 1000
	DefaultKubeBurst   = 2000
	DefaultKubeWorkers = kube.DefaultWorkers
)

// kubeRuntime sets what the scheduler runs while it leads: the Kubernetes
// runtime, creating users' pods' workloads through workloads and opening
// pods' credentials through credentials (as each pod's node's agent). The
// scheduler's NodeLostGrace, when not set, becomes the runtime's default
// (kube.DefaultNodeLostGrace: Kubernetes' not-ready toleration), and
// Runway's pods tolerate a NotReady node for as long.
func kubeRuntime(k KubeConfig, sched *scheduler.Config, etcd *clientv3.Client, workloads, credentials *grpc.ClientConn, log *slog.Logger) error {
	rc, err := kubeClientConfig(k.Kubeconfig)
	if err != nil {
		return err
	}
	if workloads == nil {
		return errors.New("the kubernetes runtime needs the workload service's address (--workload-server)")
	}
	var tolerations []corev1.Toleration
	for _, s := range k.Tolerations {
		t, err := kube.ParseToleration(s)
		if err != nil {
			return err
		}
		tolerations = append(tolerations, t)
	}
	rc.QPS, rc.Burst = k.QPS, k.Burst
	if rc.QPS <= 0 {
		rc.QPS = DefaultKubeQPS
	}
	if rc.Burst <= 0 {
		rc.Burst = DefaultKubeBurst
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	cfg := kube.Config{Kube: cs, Etcd: etcd, Workloads: workloadv1.NewWorkloadServiceClient(workloads),
		Namespace: k.Namespace, DeleteGrace: k.DeleteGrace, LeaseTTL: k.LeaseTTL, Workers: k.Workers, Logger: log,
		Tolerations: tolerations, ReservationImage: k.ReservationImage, Credentials: workloadv1.NewCredentialServiceClient(credentials)}
	sched.NodeLostGrace = cmp.Or(sched.NodeLostGrace, kube.DefaultNodeLostGrace)
	cfg.NodeLostGrace = sched.NodeLostGrace
	sched.WhileLeading = func(ctx context.Context) error { return kube.Run(ctx, cfg) }
	return nil
}

// kubeClient is a client of the kubeconfig file's cluster, or of the
// in-cluster one when kubeconfig is empty.
func kubeClient(kubeconfig string) (*kubernetes.Clientset, error) {
	rc, err := kubeClientConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}

// kubeClientConfig is the client config of a kubeconfig file, or the
// in-cluster one (a pod's service account) when kubeconfig is empty.
func kubeClientConfig(kubeconfig string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	return rc, nil
}

// ReserveGPU is a reservation pod's container: it reports the GPU the
// device plugin gave it (NVIDIA_VISIBLE_DEVICES) on its own pod (POD_NAME,
// POD_NAMESPACE from the downward API), then holds the device until ctx
// ends.
func ReserveGPU(ctx context.Context) error {
	rc, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("kubernetes client config: %w", err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	ns, pod := os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
	if ns == "" || pod == "" {
		return errors.New("POD_NAMESPACE and POD_NAME must be set (the downward API)")
	}
	if err := kube.ReportGPU(ctx, cs, ns, pod, os.Getenv("NVIDIA_VISIBLE_DEVICES")); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
