package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/nodemanager"
)

// AgentVersion is what the runtime reports as the nodes' agent version.
const AgentVersion = "kubernetes"

// grant takes the lease every node is registered under.
func (r *runtime) grant(ctx context.Context) (clientv3.LeaseID, error) {
	ttl := int64((r.cfg.LeaseTTL + time.Second - 1) / time.Second)
	l, err := r.cfg.Etcd.Grant(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("kube: grant the nodes' lease: %w", err)
	}
	return l.ID, nil
}

// keepAlive keeps the lease alive; when it is lost the worker takes a new
// one and registers every node again. Like an agent, the runtime never
// revokes it: when it stops (leadership moves) the nodes stay for the TTL,
// which is time for the next leader's runtime to register them again.
func (r *runtime) keepAlive(ctx context.Context, lease clientv3.LeaseID) {
	alive, err := r.cfg.Etcd.KeepAlive(ctx, lease)
	if err == nil {
		for range alive {
		}
	}
	if ctx.Err() == nil {
		r.queue.Add(kindLease + ":")
	}
}

func (r *runtime) renewLease(ctx context.Context) error {
	lease, err := r.grant(ctx)
	if err != nil {
		return err
	}
	r.log.Warn("kubernetes runtime: nodes' lease lost; registering every node again")
	r.mu.Lock()
	r.lease = lease
	clear(r.registered)
	r.mu.Unlock()
	go r.keepAlive(ctx, lease)
	nodes, err := r.nodes.List(everything)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		r.queue.Add(kindNode + ":" + n.Name)
	}
	return nil
}

// syncNode registers a Kubernetes node as a Runway node, or removes the
// registration of a deleted one.
func (r *runtime) syncNode(ctx context.Context, name string) error {
	id := nodeID(name)
	if id == "" {
		r.log.Warn("kubernetes runtime: node name cannot be a Runway node id; skipped", "node", name)
		return nil
	}
	kn, err := r.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		r.mu.Lock()
		_, ok := r.registered[id]
		delete(r.registered, id)
		r.mu.Unlock()
		if !ok {
			return nil
		}
		_, err := r.cfg.Etcd.Txn(ctx).Then(
			clientv3.OpDelete(etcdstore.PrefixNodes+id), clientv3.OpDelete(etcdstore.PrefixLeases+id)).Commit()
		return err
	}
	if err != nil {
		return err
	}
	if relabelling, err := r.syncRoles(ctx, kn, id); err != nil || relabelling {
		return err
	}
	n := r.nodeOf(kn, id)
	r.mu.Lock()
	old := r.registered[id]
	r.mu.Unlock()
	if old != nil {
		n.Uid, n.CreateTime, n.ReadinessChangeTime = old.Uid, old.CreateTime, old.ReadinessChangeTime
		if n.Readiness != old.Readiness {
			n.ReadinessChangeTime = timestamppb.Now()
		}
		n.UpdateTime, n.HeartbeatTime = old.UpdateTime, old.HeartbeatTime
		if proto.Equal(n, old) {
			return nil
		}
	} else {
		n.Uid, n.CreateTime, n.ReadinessChangeTime = nodemanager.NewUID(), timestamppb.Now(), timestamppb.Now()
	}
	n.UpdateTime, n.HeartbeatTime = timestamppb.Now(), timestamppb.Now()
	if err := nodemanager.RegisterNode(ctx, r.cfg.Etcd, n, r.leaseID()); err != nil {
		return err
	}
	r.mu.Lock()
	r.registered[id] = n
	r.mu.Unlock()
	return nil
}

// nodeOf describes a Kubernetes node as Runway sees it. Its GPUs are
// nvidia.com/gpu (allocatable, else capacity), described by GPU feature
// discovery's labels; the pods other schedulers put on the node hold some
// of them, and only the rest are listed as devices, because the scheduler
// places pods on devices.
func (r *runtime) nodeOf(kn *corev1.Node, id string) *nodemanagerv1.Node {
	alloc := kn.Status.Allocatable
	if len(alloc) == 0 {
		alloc = kn.Status.Capacity
	}
	gpus := alloc.Name(ResourceGPU, resource.DecimalSI).Value()
	capacity := &commonv1.ResourceQuantity{
		MilliCpu: kn.Status.Capacity.Cpu().MilliValue(), MemoryBytes: kn.Status.Capacity.Memory().Value(),
		MilliGpus: kn.Status.Capacity.Name(ResourceGPU, resource.DecimalSI).Value() * 1000,
	}
	usedCPU, usedMem, usedGPU := r.foreignUse(kn.Name)
	free := &commonv1.ResourceQuantity{
		MilliCpu:    max(alloc.Cpu().MilliValue()-usedCPU, 0),
		MemoryBytes: max(alloc.Memory().Value()-usedMem, 0),
		MilliGpus:   max(gpus-usedGPU, 0) * 1000,
	}
	n := &nodemanagerv1.Node{
		Name:         nodemanager.NodeName(id),
		Labels:       kn.Labels,
		Roles:        rolesOf(kn.Labels),
		Capacity:     capacity,
		Allocatable:  free,
		AgentVersion: AgentVersion,
	}
	if p := kn.Labels[LabelNodePool]; p != "" {
		n.NodePool = "nodepools/" + p
	}
	n.Readiness, n.ReadinessMessage = readiness(kn)
	n.Drained, n.DrainEvicts, n.DrainReason = cordon(kn, r.tolerations(kn))
	model := kn.Labels[LabelGPUProduct]
	mib, _ := strconv.ParseInt(kn.Labels[LabelGPUMemory], 10, 64)
	for i := range free.MilliGpus / 1000 {
		n.Devices = append(n.Devices, &nodemanagerv1.GpuDevice{
			Index: int32(i), Uuid: fmt.Sprintf("k8s-%s-%d", id, i), Model: model, MemoryBytes: mib << 20,
			MigMode: nodemanagerv1.MigMode_MIG_MODE_DISABLED, Healthy: true,
		})
	}
	return n
}

// cordon is the drain a Kubernetes node asks for: cordoned
// (unschedulable) or tainted NoSchedule is a drain without eviction, so
// that its pods run on and nothing new is placed on it; tainted NoExecute
// is a drain with eviction (the `runai=drain:NoExecute` style), as the
// kubelet's taint manager would evict them. Taints that Runway's pods
// there tolerate (Config.Tolerations and the node pool's, pools.go) are no
// drain, nor are the taints of a NotReady node (lapseTaints): its Ready
// condition is its readiness, which the scheduler gives its grace. A drain
// of Runway's own, in the drain key, still wins when the node registers.
func cordon(kn *corev1.Node, tolerations []corev1.Toleration) (drained, evicts bool, reason string) {
	for _, t := range kn.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoExecute || tolerated(t, tolerations) || slices.Contains(lapseTaints, t.Key) {
			continue
		}
		return true, true, fmt.Sprintf("The Kubernetes node has the taint %s, which Runway's pods do not tolerate: its pods are evicted.", t.ToString())
	}
	if kn.Spec.Unschedulable {
		return true, false, "The Kubernetes node is cordoned (unschedulable)."
	}
	for _, t := range kn.Spec.Taints {
		if t.Effect != corev1.TaintEffectNoSchedule || tolerated(t, tolerations) || slices.Contains(lapseTaints, t.Key) {
			continue
		}
		return true, false, fmt.Sprintf("The Kubernetes node has the taint %s, which Runway's pods do not tolerate.", t.ToString())
	}
	return false, false, ""
}

func tolerated(t corev1.Taint, tolerations []corev1.Toleration) bool {
	for _, tol := range tolerations {
		if tol.ToleratesTaint(klog.Background(), &t, false) {
			return true
		}
	}
	return false
}

// readiness is the node's Ready condition.
func readiness(kn *corev1.Node) (nodemanagerv1.Readiness, string) {
	for _, c := range kn.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return nodemanagerv1.Readiness_READINESS_READY, "Kubernetes node Ready."
		}
		return nodemanagerv1.Readiness_READINESS_NOT_READY, fmt.Sprintf("Kubernetes node not Ready (%s): %s", c.Reason, c.Message)
	}
	return nodemanagerv1.Readiness_READINESS_NOT_READY, "The Kubernetes node has no Ready condition."
}

// foreignUse sums the requests of the live pods other schedulers placed on
// the node (milli-CPU, bytes, GPUs).
func (r *runtime) foreignUse(node string) (cpu, mem, gpus int64) {
	objs, err := r.podIdx.ByIndex(indexPodNode, node)
	if err != nil {
		return 0, 0, 0
	}
	for _, o := range objs {
		p := o.(*corev1.Pod)
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			cpu += c.Resources.Requests.Cpu().MilliValue()
			mem += c.Resources.Requests.Memory().Value()
		}
		gpus += podGPUs(p)
	}
	return cpu, mem, gpus
}

var errNoNode = errors.New("the binding's node is not a Kubernetes node")
