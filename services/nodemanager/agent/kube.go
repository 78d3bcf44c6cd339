package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/gpu"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/kubelet"
	"github.com/runwayhq/runway/services/nodemanager"
	"github.com/runwayhq/runway/services/nodemanager/kube"
)

// KubeMode is the agent on a Kubernetes node (Config.Kube): the kubelet
// runs the pods and the Kubernetes runtime registers the node and reports
// the pods' phases, so the agent registers nothing and writes no run
// report. It does the GPU manager's part for the Runway pods on its node:
// found by a pod informer (spec.nodeName; Runway's pods by their mark,
// kube.Marks, since they share their projects' namespaces), their
// processes by cgroup (pkg/runner/kubelet), their devices by the UUIDs
// the runtime gave them. Its findings go on the pod, where the runtime
// folds them into the run report: a pod over its memory slice is killed
// and annotated kube.AnnotationEndedByAgent with why; its GPU idle time is
// kube.AnnotationGPUIdleSeconds.
type KubeMode struct {
	// Client reaches the API server. Required.
	Client kubernetes.Interface
	// NodeManager is the NodeManagerService, called with the agent's
	// service account token bound to its pod (per-call credentials): it
	// gives the agent its node's mark key (GetNodeMarkKey, kube.NodeKeys),
	// and the agent holds no other. Required.
	NodeManager nodemanagerv1.NodeManagerServiceClient
	// NodeName is the Kubernetes node's name (Config.Node is its Runway
	// id, kube.NodeID). Required.
	NodeName string
	// Namespace is Runway's namespace (kube.DefaultNamespace when empty):
	// its pods are Runway's; elsewhere only marked ones are (kube.Marks).
	Namespace string
	// Procs is where the node's processes and cgroups are seen.
	Procs kubelet.Config
	// PodResources is the kubelet's pod-resources socket
	// (kubelet.DefaultPodResources when empty): which GPUs the device
	// plugin gave a whole-GPU pod.
	PodResources string
	// LogRoot is the kubelet's pod log directory (DefaultLogRoot when
	// empty): <ns>_<pod>_<uid>/<container>/<restart>.log, served as the
	// pods' output when Config.Listen is set.
	LogRoot string
}

// DefaultLogRoot is where the kubelet keeps the pods' logs.
const DefaultLogRoot = "/var/log/pods"

// kubeResync is how often every pod is looked at again (a whole-GPU pod
// whose devices the kubelet did not say is asked again).
const kubeResync = 30 * time.Second

// annotateTimeout bounds one write of a pod's annotations.
const annotateTimeout = 10 * time.Second

// kubeAgent is the agent in Kubernetes mode.
type kubeAgent struct {
	cfg  Config
	km   KubeMode
	node *kubelet.Node
	gpus *gpuManager
	log  *slog.Logger
	ctx  context.Context

	store cache.Store // the informer's pods
	marks kube.Marks  // tells Runway's pods from their users' and signs the findings

	mu   sync.Mutex
	pods map[types.UID]*kubePod // followed, by UID
}

// runKube runs the agent in Kubernetes mode until ctx is done.
func runKube(ctx context.Context, cfg Config) error {
	km := *cfg.Kube
	switch {
	case km.Client == nil:
		return errors.New("agent: Config.Kube.Client is nil")
	case km.NodeName == "":
		return errors.New("agent: Config.Kube.NodeName is empty")
	case km.NodeManager == nil:
		return errors.New("agent: Config.Kube.NodeManager is nil (the node's mark key comes from there)")
	}
	if km.Namespace == "" {
		km.Namespace = kube.DefaultNamespace
	}
	if km.LogRoot == "" {
		km.LogRoot = DefaultLogRoot
	}
	devices, err := cfg.Backend.Devices()
	if err != nil {
		return fmt.Errorf("agent: read GPUs: %w", err)
	}
	marks, err := nodeMarks(ctx, km, cfg.Logger)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	log := cfg.Logger.With("node", cfg.Node, "kubernetes node", km.NodeName)
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	a := &kubeAgent{cfg: cfg, km: km, node: kubelet.New(km.Procs), log: log, ctx: ctx, pods: map[types.UID]*kubePod{}, marks: marks}
	a.gpus = newGPUManager(cfg, devices, a.cpu, log)
	// The node key is the runtime's: device faults are logged here, and the
	// device plugin takes an unhealthy device off the node's allocatable.
	health := make(chan map[int]string, 1)
	a.gpus.health = health
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case bad := <-health:
				log.Warn("GPU health changed", "unhealthy", bad)
			}
		}
	})
	if w, ok := cfg.Backend.(interface{ WatchHealth(context.Context) error }); ok {
		wg.Go(func() {
			if err := w.WatchHealth(ctx); err != nil {
				log.Warn("GPU health not watched", "err", err)
			}
		})
	}
	f := informers.NewSharedInformerFactoryWithOptions(km.Client, kubeResync,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", km.NodeName).String()
		}))
	inf := f.Core().V1().Pods().Informer()
	a.store = inf.GetStore() // the handlers read it (reservedUUIDs) from the first event
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.sync(obj) },
		UpdateFunc: func(_, obj any) { a.sync(obj) },
		DeleteFunc: func(obj any) { a.gone(obj) },
	}); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	served := make(chan error, 1)
	if cfg.Listen != "" {
		srv, addr, err := cfg.listen(&logServer{client: cfg.Client, find: a.logFile})
		if err != nil {
			return err
		}
		wg.Go(func() {
			served <- srv.Serve(ctx)
			cancel() // the agent stops with its listener
		})
		wg.Go(func() { a.advertise(ctx, addr) })
	}
	log.Info("node agent: Kubernetes mode, following the Runway pods the kubelet runs")
	a.gpus.run(ctx)
	f.Shutdown() // no more events: nothing is followed again
	a.mu.Lock()
	for uid := range a.pods {
		a.forget(uid)
	}
	a.mu.Unlock()
	select {
	case err := <-served:
		if err != nil && parent.Err() == nil {
			return fmt.Errorf("agent: pod output: %w", err)
		}
	default:
	}
	return parent.Err()
}

// nodeMarks asks the NodeManagerService for the node's mark key, again
// with backoff while it is unavailable (not yet up, no leader of etcd).
func nodeMarks(ctx context.Context, km KubeMode, log *slog.Logger) (kube.Marks, error) {
	backoff := 100 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, annotateTimeout)
		k, err := km.NodeManager.GetNodeMarkKey(cctx, &nodemanagerv1.GetNodeMarkKeyRequest{KubernetesNode: km.NodeName})
		cancel()
		if err == nil {
			return kube.NewMarks(km.NodeName, k.GetKey())
		}
		if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded || ctx.Err() != nil {
			return kube.Marks{}, fmt.Errorf("the node's mark key (NodeManagerService.GetNodeMarkKey): %w", err)
		}
		log.Warn("the node's mark key not given yet; asking again", "err", err)
		select {
		case <-ctx.Done():
			return kube.Marks{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// cpu refreshes the node's processes (one walk of /proc for every pod)
// and measures each pod.
func (a *kubeAgent) cpu(ps []podProcs) []time.Duration {
	a.node.Refresh()
	out := make([]time.Duration, len(ps))
	for i, p := range ps {
		out[i] = p.CPU()
	}
	return out
}

// sync follows a Runway pod while it runs on the node, and forgets it once
// it has ended or is being deleted.
func (a *kubeAgent) sync(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, followed := a.pods[p.UID]
	if followed {
		if !a.runs(p) {
			a.forget(p.UID)
		}
		return
	}
	if gp, want := a.gpuPod(p); want {
		kp := &kubePod{a: a, ns: p.Namespace, name: p.Name, uid: p.UID, wake: make(chan struct{}, 1), stop: make(chan struct{})}
		kp.proc = a.node.Follow(string(p.UID))
		gp.proc, gp.run = kp.proc, kp
		a.pods[p.UID] = kp
		a.gpus.add(gp)
		go kp.annotate()
		a.log.Info("following pod", "pod", p.Namespace+"/"+p.Name, "devices", gp.b.Devices, "memory limit", gp.limit)
	}
}

// runs reports whether p is one of Runway's pods running on the node.
func (a *kubeAgent) runs(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == a.km.NodeName &&
		a.marks.Ours(p, a.km.Namespace)
}

// bindingOf is the binding p runs, from its annotation (which its mark
// covers; labels do not count: users may change them).
func (a *kubeAgent) bindingOf(p *corev1.Pod) (nodemanager.Binding, bool) {
	b, err := nodemanager.DecodeBinding(etcdstore.PrefixBindings+p.Annotations[kube.AnnotationBinding], nil)
	return b, err == nil && b.Node == a.cfg.Node
}

// gone forgets a deleted pod.
func (a *kubeAgent) gone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, followed := a.pods[p.UID]; followed {
		a.forget(p.UID)
	}
}

// forget stops following a pod; a.mu is held.
func (a *kubeAgent) forget(uid types.UID) {
	kp := a.pods[uid]
	delete(a.pods, uid)
	a.gpus.remove(string(uid))
	a.node.Forget(string(uid))
	close(kp.stop)
}

// gpuPod is what the GPU manager tracks of a running Runway pod that holds
// GPUs, and false for any other pod. A fraction's devices are the UUIDs the
// runtime gave it; a whole-GPU pod's are the device plugin's choice, which
// only the kubelet knows (its pod-resources API, asked once per pod; a
// failed question is asked again at the informer's next resync).
func (a *kubeAgent) gpuPod(p *corev1.Pod) (*gpuPod, bool) {
	if !a.runs(p) {
		return nil, false
	}
	bound, ok := a.bindingOf(p)
	if !ok {
		return nil, false
	}
	b := nodemanager.Binding{Node: a.cfg.Node, Project: bound.Project, Workload: bound.Workload, Pod: bound.Pod}
	b.FractionMilli, _ = strconv.ParseInt(p.Annotations[kube.AnnotationFractionMilli], 10, 64)
	env := map[string]string{}
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
	}
	var uuids []string
	if b.FractionMilli > 0 && b.FractionMilli < 1000 {
		uuids = a.reservedUUIDs(p)
	} else {
		if !wholeGPUs(p) {
			return nil, false
		}
		ids, err := kubelet.Devices(a.ctx, a.km.PodResources, p.Namespace, p.Name, kube.ResourceGPU)
		if err != nil {
			a.log.Warn("the kubelet did not say which GPUs the pod holds", "pod", p.Namespace+"/"+p.Name, "err", err)
			return nil, false
		}
		uuids, b.FractionMilli = ids, 1000
	}
	for _, u := range uuids {
		if i := slices.IndexFunc(a.gpus.devices, func(d gpu.DeviceInfo) bool { return d.UUID == u }); i >= 0 {
			b.Devices = append(b.Devices, a.gpus.devices[i].Index)
		}
	}
	if len(b.Devices) == 0 {
		return nil, false
	}
	request, _ := strconv.ParseInt(env[runner.EnvGPUMemoryLimit], 10, 64)
	return &gpuPod{id: string(p.UID), b: b, limit: a.gpus.memoryLimit(b, request)}, true
}

// reservedUUIDs are the GPUs of a fraction's pod: for each device its
// marked annotation names, the UUID its reservation pod (Runway's
// namespace) reports. Never the pod's own environment: a copy of the pod
// (the mark does not cover the spec) could name another tenant's GPU there.
func (a *kubeAgent) reservedUUIDs(p *corev1.Pod) []string {
	var out []string
	for _, d := range strings.Split(p.Annotations[kube.AnnotationDevices], ",") {
		i, err := strconv.Atoi(d)
		if err != nil {
			return nil
		}
		obj, ok, _ := a.store.GetByKey(a.km.Namespace + "/" + kube.ReservationName(p.Spec.NodeName, i))
		r, isPod := obj.(*corev1.Pod)
		if !ok || !isPod || r.Annotations[kube.AnnotationGPUUUID] == "" {
			return nil // not reported yet: looked at again at the next resync
		}
		out = append(out, r.Annotations[kube.AnnotationGPUUUID])
	}
	return out
}

// logFile is the kubelet's log of the main container of pod index of w
// on this node (its latest restart's); path "" when the node has no such
// pod. The newest such pod is the workload's:
// an older one of the same name is being deleted.
func (a *kubeAgent) logFile(w *workloadv1.Workload, index int) logFile {
	project, workload, _ := clusterproto.ParseWorkloadName(w.GetName())
	var pod *corev1.Pod
	for _, obj := range a.store.List() {
		p := obj.(*corev1.Pod)
		b, ok := a.bindingOf(p)
		if ok && b.Project == project && b.Workload == workload && b.Pod == index && a.marks.Ours(p, a.km.Namespace) &&
			(pod == nil || pod.CreationTimestamp.Before(&p.CreationTimestamp)) {
			pod = p
		}
	}
	if pod == nil || len(pod.Spec.Containers) == 0 {
		return logFile{}
	}
	dir := filepath.Join(a.km.LogRoot, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), pod.Spec.Containers[0].Name)
	ents, _ := os.ReadDir(dir)
	last := -1
	for _, e := range ents {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil && strings.HasSuffix(e.Name(), ".log") && n > last {
			last = n
		}
	}
	if last < 0 {
		return logFile{}
	}
	key, uid := pod.Namespace+"/"+pod.Name, pod.UID
	return logFile{path: filepath.Join(dir, strconv.Itoa(last)+".log"), cri: true, alive: func() bool {
		obj, ok, _ := a.store.GetByKey(key)
		p, _ := obj.(*corev1.Pod)
		return ok && p.UID == uid && p.DeletionTimestamp == nil &&
			(p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending)
	}}
}

// advertise keeps agents/<node> (the address of the agent's pod output,
// which the workload service relays) under a lease of the agent's own:
// the node key is the runtime's. A lost lease is granted again.
func (a *kubeAgent) advertise(ctx context.Context, addr string) {
	ttl := int64((a.cfg.LeaseTTL + time.Second - 1) / time.Second)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := func() error {
			lease, err := a.cfg.Client.Grant(ctx, ttl)
			if err != nil {
				return err
			}
			if _, err := a.cfg.Client.Put(ctx, nodemanager.AgentKey(a.cfg.Node), addr, clientv3.WithLease(lease.ID)); err != nil {
				return err
			}
			alive, err := a.cfg.Client.KeepAlive(ctx, lease.ID)
			if err != nil {
				return err
			}
			backoff = 100 * time.Millisecond
			for range alive {
			}
			return errors.New("lease keep-alive ended")
		}()
		if ctx.Err() != nil {
			return
		}
		a.log.Warn("agent address not kept; writing it again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// wholeGPUs reports whether a pod asks the device plugin for GPUs.
func wholeGPUs(p *corev1.Pod) bool {
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Limits[kube.ResourceGPU]; ok && q.Value() > 0 {
			return true
		}
	}
	return false
}

// kubePod is a followed pod's reports: what the GPU manager finds is
// written on the pod's annotations by one goroutine (annotate), retried
// until written, latest value first.
type kubePod struct {
	a        *kubeAgent
	ns, name string
	uid      types.UID
	proc     *kubelet.Pod
	wake     chan struct{} // something new to write
	stop     chan struct{} // closed once the pod is forgotten

	mu    sync.Mutex
	ended string        // why the agent ended it; "" while it may run
	idle  time.Duration // its GPU idle time
	dirty bool          // not yet written
}

// outOfMemory kills the pod's processes at once (the kubelet then sees its
// containers end) and records why on the pod; the first reason wins.
func (p *kubePod) outOfMemory(reason string) {
	p.mu.Lock()
	first := p.ended == ""
	if first {
		p.ended, p.dirty = reason, true
	}
	p.mu.Unlock()
	if err := p.proc.Kill(); err != nil {
		p.a.log.Warn("pod over its GPU memory slice not killed", "pod", p.ns+"/"+p.name, "err", err)
	}
	if first {
		p.a.log.Warn("pod ended: "+reason, "pod", p.ns+"/"+p.name)
		p.poke()
	}
}

func (p *kubePod) idleChanged(idle time.Duration) {
	p.mu.Lock()
	p.idle, p.dirty = idle, true
	p.mu.Unlock()
	p.poke()
}

func (p *kubePod) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// annotate writes the pod's findings whenever they change, until the pod
// is forgotten; a failed write is tried again with backoff.
func (p *kubePod) annotate() {
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
		for {
			p.mu.Lock()
			idle := strconv.FormatInt(int64(p.idle/time.Second), 10)
			// Every finding is written each time, a null deleting an
			// ended-by someone else wrote: the signature covers them all.
			ann, dirty := map[string]any{kube.AnnotationGPUIdleSeconds: idle, kube.AnnotationEndedByAgent: nil,
				kube.AnnotationAgentReportMAC: p.a.marks.SignAgentReport(p.ns, p.name, string(p.uid), p.ended, idle, time.Now())}, p.dirty
			if p.ended != "" {
				ann[kube.AnnotationEndedByAgent] = p.ended
			}
			p.dirty = false
			p.mu.Unlock()
			if !dirty {
				break
			}
			if err := p.patch(ann); err == nil {
				backoff = 100 * time.Millisecond
				continue
			} else {
				p.a.log.Warn("pod annotations not written; trying again", "pod", p.ns+"/"+p.name, "err", err)
			}
			p.mu.Lock()
			p.dirty = true
			p.mu.Unlock()
			select {
			case <-p.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// patch merges ann into the pod's annotations, only on this very pod (its
// UID is a precondition: a pod of the same name made again is not it).
func (p *kubePod) patch(ann map[string]any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": p.uid, "annotations": ann}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(p.a.ctx, annotateTimeout)
	defer cancel()
	_, err = p.a.km.Client.CoreV1().Pods(p.ns).Patch(ctx, p.name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}
