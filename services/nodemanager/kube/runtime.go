package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/nodemanager"
)

// ServiceName is the runtime's service principal, services/kubernetes,
// which acts as services/kubernetes/projects/{p} (auth.ProjectCredentials).
const ServiceName = "kubernetes"

// Defaults for zero Config fields.
const (
	DefaultNamespace   = "runway"
	DefaultLeaseTTL    = 10 * time.Second
	DefaultDeleteGrace = 30 * time.Second
	// DefaultNodeLostGrace is Config.NodeLostGrace when 0, and the
	// scheduler's NodeLostGrace with this runtime: Kubernetes' own default
	// not-ready toleration (300 s).
	DefaultNodeLostGrace = 5 * time.Minute
	// DefaultWorkers: enough concurrent requests to keep an apiserver busy
	// (its default --max-requests-inflight is 400, 200 of them writes)
	// without queueing many of them there.
	DefaultWorkers = 64
)

// Config is one runtime.
type Config struct {
	// Kube is the Kubernetes client. Required.
	Kube kubernetes.Interface
	// Etcd is Runway's etcd. Required.
	Etcd *clientv3.Client
	// Workloads creates and deletes the workloads of users' pods. Required.
	// Every call's context names the pod's project (auth.ForProject): the
	// connection is meant to carry auth.Guard.ProjectCredentials, so that
	// the runtime acts with that project's access alone.
	Workloads workloadv1.WorkloadServiceClient
	// Credentials opens the credentials of workloads' pods, which become
	// Secrets of the pods (secrets.go). Every call's context names the
	// pod's node (auth.ForNode): the connection is meant to carry
	// auth.Guard.NodeAgentsCredentials, so that the runtime opens a pod's
	// credentials as its node's agent. Nil: a workload naming credentials
	// fails.
	Credentials workloadv1.CredentialServiceClient
	// Namespace is Runway's own namespace (DefaultNamespace when empty),
	// where the reservation pods of fractions' GPUs are created; it must
	// exist. The pods of workloads are created in their project's
	// namespace (ProjectNamespace).
	Namespace string
	// LeaseTTL is the TTL of the lease the nodes are registered under: how
	// long they stay after the runtime dies (DefaultLeaseTTL when 0).
	LeaseTTL time.Duration
	// DeleteGrace is the grace period of an evicted pod's deletion
	// (DefaultDeleteGrace when 0).
	DeleteGrace time.Duration
	// Tolerations are the taints Runway's pods tolerate everywhere: they
	// are put on every pod Runway creates, with those of the node pool the
	// pod's node is in (pools.go), and a node with a NoSchedule or
	// NoExecute taint none of them tolerates is drained (cordon).
	Tolerations []corev1.Toleration
	// NodeLostGrace is the scheduler's NodeLostGrace (DefaultNodeLostGrace
	// when 0; negative is none): the pods Runway creates tolerate the
	// taints Kubernetes puts on a NotReady or unreachable node
	// (node.kubernetes.io/not-ready, /unreachable, NoExecute) for that
	// long, so that Kubernetes evicts them no sooner than the scheduler
	// gives them up. Those taints are no drain: the Ready condition they
	// follow is the node's readiness, and the scheduler's grace covers it.
	NodeLostGrace time.Duration
	// ReservationImage is the image of the reservation pods that own the
	// GPUs holding fractions (DefaultReservationImage when empty). Its
	// container reports the UUID the device plugin gave it
	// (NVIDIA_VISIBLE_DEVICES) as the pod's AnnotationGPUUUID.
	ReservationImage string
	// GitImage is the image of the init containers that clone git data
	// sources (DefaultGitImage when empty): git and sh on its PATH.
	GitImage string
	// Resync is the informers' resync period (none when 0).
	Resync time.Duration
	// Workers is how many queue keys are handled at once (DefaultWorkers
	// when 0); one key (one pod, binding or node) is never handled by two
	// workers at once, so each object's writes keep their order.
	Workers int
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

func (cfg *Config) check() error {
	switch {
	case cfg.Kube == nil:
		return errors.New("kube: Config.Kube is nil")
	case cfg.Etcd == nil:
		return errors.New("kube: Config.Etcd is nil")
	case cfg.Workloads == nil:
		return errors.New("kube: Config.Workloads is nil")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.DeleteGrace <= 0 {
		cfg.DeleteGrace = DefaultDeleteGrace
	}
	if cfg.NodeLostGrace == 0 {
		cfg.NodeLostGrace = DefaultNodeLostGrace
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return nil
}

// Work queue keys: a kind letter, ':', the object's key.
const (
	kindNode     = "n" // Kubernetes node name
	kindBinding  = "b" // binding key below PrefixBindings
	kindPod      = "p" // namespace/name
	kindForeign  = "f" // projects/{p}/workloads/{w} of a deleted user's pod
	kindLease    = "l" // the registration lease was lost
	kindProject  = "j" // project id: its namespace and quota
	indexNodeID  = "runwayNodeID"
	indexBinding = "runwayBinding"
	indexForeign = "runwayWorkload"
	indexPodNode = "runwayPodNode"
)

// binding is one binding the watch delivered, with its create revision.
type binding struct {
	nodemanager.Binding
	key string // below PrefixBindings
	rev int64
}

// runtime is one Run's state. The work queue hands a key to one worker at a
// time, so all writes about one object are in order; the maps that workers
// share are under mu.
type runtime struct {
	cfg    Config
	log    *slog.Logger
	queue  workqueue.TypedRateLimitingInterface[string]
	marker marker // the mark of Runway's pods in projects' namespaces

	nodes    corelisters.NodeLister
	nodeIdx  cache.Indexer
	pods     corelisters.PodLister
	podIdx   cache.Indexer
	mu       sync.Mutex
	bindings map[string]binding // by key below PrefixBindings, written by the watch goroutine
	// onNode is the keys of bindings by Runway node id (under mu): what a
	// pod event on a node requeues, without a walk of every binding.
	onNode map[string]map[string]struct{}

	lease      clientv3.LeaseID               // under mu
	registered map[string]*nodemanagerv1.Node // under mu, by node id: what was last written
	reported   map[string]runReport           // under mu, by binding key "@" create revision
	agentFound map[string]agentFound          // under mu, likewise: the node agents' signed findings
	created    map[string]bool                // under mu, users' pods' workloads created, by name
	userHolds  map[string]userHold            // under mu, users' fraction pods' devices, by pod key (usergpu.go)
	namespaces map[string]bool                // under mu, projects whose namespace is Runway's, by id
	pools      map[string]*quotav1.NodePool   // under mu, by name: their tolerations
}

// Run registers the cluster's nodes and runs Runway's bindings as pods
// until ctx ends. It returns ctx's error, or an error when it cannot start.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &runtime{cfg: cfg, log: cfg.Logger.With("runtime", "kubernetes"),
		queue:      workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		bindings:   map[string]binding{},
		onNode:     map[string]map[string]struct{}{},
		registered: map[string]*nodemanagerv1.Node{}, reported: map[string]runReport{}, agentFound: map[string]agentFound{},
		created: map[string]bool{}, namespaces: map[string]bool{}}
	defer r.queue.ShutDown()
	// Before the informers: their indexes tell Runway's pods by the mark.
	var err error
	if r.marker, err = loadMarker(ctx, cfg.Kube, cfg.Namespace, cfg.Etcd); err != nil {
		return err
	}

	f := informers.NewSharedInformerFactory(cfg.Kube, cfg.Resync)
	nodeInf, podInf := f.Core().V1().Nodes(), f.Core().V1().Pods()
	if err := nodeInf.Informer().AddIndexers(cache.Indexers{indexNodeID: func(obj any) ([]string, error) {
		if id := nodeID(obj.(*corev1.Node).Name); id != "" {
			return []string{id}, nil
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	if err := podInf.Informer().AddIndexers(cache.Indexers{
		indexBinding: func(obj any) ([]string, error) {
			if p := obj.(*corev1.Pod); p.Annotations[AnnotationBinding] != "" && r.ours(p) {
				return []string{p.Annotations[AnnotationBinding]}, nil
			}
			return nil, nil
		},
		indexDevice: func(obj any) ([]string, error) { return r.deviceKeys(obj.(*corev1.Pod)), nil },
		indexForeign: func(obj any) ([]string, error) {
			if w := foreignWorkload(obj.(*corev1.Pod)); w != "" {
				return []string{w}, nil
			}
			return nil, nil
		},
		// Pods Runway did not place, by node: what they hold of it
		// (foreignUse), a user's pod that names its node itself included.
		indexPodNode: func(obj any) ([]string, error) {
			if p := obj.(*corev1.Pod); p.Spec.NodeName != "" && !r.ours(p) {
				return []string{p.Spec.NodeName}, nil
			}
			return nil, nil
		},
	}); err != nil {
		return err
	}
	r.nodes, r.nodeIdx = nodeInf.Lister(), nodeInf.Informer().GetIndexer()
	r.pods, r.podIdx = podInf.Lister(), podInf.Informer().GetIndexer()
	if _, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.enqueueNode(obj) },
		UpdateFunc: func(_, obj any) { r.enqueueNode(obj) },
		DeleteFunc: func(obj any) { r.enqueueNode(obj) },
	}); err != nil {
		return err
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.enqueuePod(obj, false) },
		UpdateFunc: func(_, obj any) { r.enqueuePod(obj, false) },
		DeleteFunc: func(obj any) { r.enqueuePod(obj, true) },
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("kube: %v informer did not sync: %w", typ, ctx.Err())
		}
	}

	poolRev, err := r.listPools(ctx)
	if err != nil {
		return err
	}
	rolesRev, err := r.listRoles(ctx)
	if err != nil {
		return err
	}
	lease, err := r.grant(ctx)
	if err != nil {
		return err
	}
	r.setLease(lease)
	rev, err := r.listBindings(ctx)
	if err != nil {
		return err
	}
	go r.watchBindings(ctx, rev+1)
	go r.keepAlive(ctx, lease)
	go r.watchProjects(ctx)
	go r.watchPools(ctx, poolRev+1)
	go r.watchRoles(ctx, rolesRev+1)
	r.log.Info("kubernetes runtime: started", "namespace", cfg.Namespace, "workers", cfg.Workers)
	// Every object once: nodes registered, bindings run, stale pods deleted.
	for _, n := range nodeInf.Informer().GetStore().ListKeys() {
		r.queue.Add(kindNode + ":" + n)
	}
	for _, p := range podInf.Informer().GetStore().ListKeys() {
		r.queue.Add(kindPod + ":" + p)
	}
	go func() {
		<-ctx.Done()
		r.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for r.next(ctx) {
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

func (r *runtime) enqueueNode(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		r.queue.Add(kindNode + ":" + n.Name)
	}
}

// enqueuePod queues the pod, the node whose free GPUs it changes, its
// binding (a deleted pod of a live binding is created again) and, for a
// deleted user's pod, its workload.
func (r *runtime) enqueuePod(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.queue.Add(kindPod + ":" + p.Namespace + "/" + p.Name)
	ours := r.ours(p)
	if p.Spec.NodeName != "" && !ours {
		r.queue.Add(kindNode + ":" + p.Spec.NodeName)
	}
	if k := p.Annotations[AnnotationBinding]; k != "" && ours {
		r.queue.Add(kindBinding + ":" + k)
	}
	if w := foreignWorkload(p); deleted && w != "" {
		r.queue.Add(kindForeign + ":" + w)
	}
	r.requeueDevices(p)
}

// next handles one queue key; false once the queue is shut down.
func (r *runtime) next(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	kind, id, _ := strings.Cut(key, ":")
	var err error
	switch kind {
	case kindNode:
		err = r.syncNode(ctx, id)
	case kindBinding:
		err = r.syncBinding(ctx, id)
	case kindPod:
		err = r.syncPod(ctx, id)
	case kindForeign:
		err = r.deleteForeign(ctx, id)
	case kindLease:
		err = r.renewLease(ctx)
	case kindProject:
		err = r.syncProject(ctx, id)
	}
	switch {
	case err == nil:
		r.queue.Forget(key)
	case ctx.Err() != nil:
	default:
		r.log.Warn("kubernetes runtime: retrying", "key", key, "err", err)
		r.queue.AddRateLimited(key)
	}
	return true
}

func (r *runtime) putBinding(key string, value []byte, rev int64) {
	b, err := nodemanager.DecodeBinding(etcdstore.PrefixBindings+key, value)
	if err != nil {
		r.log.Error("kubernetes runtime: ignoring binding", "key", key, "err", err)
		return
	}
	r.mu.Lock()
	r.bindings[key] = binding{Binding: b, key: key, rev: rev}
	keys, ok := r.onNode[b.Node]
	if !ok {
		keys = map[string]struct{}{}
		r.onNode[b.Node] = keys
	}
	keys[key] = struct{}{}
	r.mu.Unlock()
	r.queue.Add(kindBinding + ":" + key)
}

func (r *runtime) deleteBinding(key string) {
	r.mu.Lock()
	old, ok := r.bindings[key]
	delete(r.bindings, key)
	if ok { // its pod reports nothing more (syncPod deletes it)
		seen := key + "@" + strconv.FormatInt(old.rev, 10)
		delete(r.reported, seen)
		delete(r.agentFound, seen)
		keys := r.onNode[old.Node]
		delete(keys, key)
		if len(keys) == 0 {
			delete(r.onNode, old.Node)
		}
	}
	r.mu.Unlock()
	r.queue.Add(kindBinding + ":" + key)
	// A fraction's reservation pods may be left unused (syncReservation).
	if node, err := r.kubeNode(old.Node); ok && fractional(old) && err == nil {
		for _, d := range old.Devices {
			r.queue.Add(kindPod + ":" + r.cfg.Namespace + "/" + reservationName(node, d))
		}
	}
}

func (r *runtime) setLease(l clientv3.LeaseID) {
	r.mu.Lock()
	r.lease = l
	r.mu.Unlock()
}

func (r *runtime) leaseID() clientv3.LeaseID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease
}

// binding returns the binding at key.
func (r *runtime) binding(key string) (binding, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.bindings[key]
	return b, ok
}

// listBindings fills the map before the worker starts.
func (r *runtime) listBindings(ctx context.Context) (int64, error) {
	resp, err := r.cfg.Etcd.Get(ctx, etcdstore.PrefixBindings, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("kube: list bindings: %w", err)
	}
	for _, kv := range resp.Kvs {
		r.putBinding(strings.TrimPrefix(string(kv.Key), etcdstore.PrefixBindings), kv.Value, kv.CreateRevision)
	}
	return resp.Header.Revision, nil
}

// watchBindings keeps the bindings map from rev on; when the watch breaks
// it lists again and applies the differences.
func (r *runtime) watchBindings(ctx context.Context, rev int64) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range r.cfg.Etcd.Watch(wctx, etcdstore.PrefixBindings, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				k := strings.TrimPrefix(string(ev.Kv.Key), etcdstore.PrefixBindings)
				if ev.Type == clientv3.EventTypeDelete {
					r.deleteBinding(k)
				} else {
					r.putBinding(k, ev.Kv.Value, ev.Kv.CreateRevision)
				}
			}
			rev = resp.Header.Revision + 1
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		// A broken watch (compaction, lost etcd leader): list again.
		resp, err := r.cfg.Etcd.Get(ctx, etcdstore.PrefixBindings, clientv3.WithPrefix())
		if err != nil {
			r.log.Warn("kubernetes runtime: list bindings", "err", err)
			time.Sleep(500 * time.Millisecond)
			continue
		}
		seen := map[string]bool{}
		for _, kv := range resp.Kvs {
			k := strings.TrimPrefix(string(kv.Key), etcdstore.PrefixBindings)
			seen[k] = true
			r.putBinding(k, kv.Value, kv.CreateRevision)
		}
		r.mu.Lock()
		var gone []string
		for k := range r.bindings {
			if !seen[k] {
				gone = append(gone, k)
			}
		}
		r.mu.Unlock()
		for _, k := range gone {
			r.deleteBinding(k)
		}
		rev = resp.Header.Revision + 1
	}
}
