package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/toleration"
)

// Tolerations per node pool. A Kubernetes node is in the pool its
// LabelNodePool names, else in the one whose selector its labels match
// (clusterproto.PoolOf, as RegisterNode decides); Runway's pods on it
// tolerate Config.Tolerations plus that pool's (quota.v1 NodePool
// tolerations), nothing more, and a taint neither tolerates drains it. The
// pools are read before the first node is registered, so that no node is
// drained for a taint its pool tolerates; a change of a pool registers
// every node again. A pod keeps the tolerations it was created with.

// listPools reads the node pools and returns the revision to watch from.
func (r *runtime) listPools(ctx context.Context) (int64, error) {
	resp, err := r.cfg.Etcd.Get(ctx, etcdstore.PrefixNodePools, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("kube: list node pools: %w", err)
	}
	pools := map[string]*quotav1.NodePool{}
	for _, kv := range resp.Kvs {
		if p := r.decodePool(kv.Key, kv.Value); p != nil {
			pools[p.GetName()] = p
		}
	}
	r.mu.Lock()
	r.pools = pools
	r.mu.Unlock()
	return resp.Header.Revision, nil
}

// decodePool is the pool stored at key, named by its key.
func (r *runtime) decodePool(key, value []byte) *quotav1.NodePool {
	p := new(quotav1.NodePool)
	if err := proto.Unmarshal(value, p); err != nil {
		r.log.Error("kubernetes runtime: ignoring a node pool", "key", string(key), "err", err)
		return nil
	}
	p.Name = "nodepools/" + strings.TrimPrefix(string(key), etcdstore.PrefixNodePools)
	return p
}

// watchPools keeps the pools from rev on and registers every node again
// when one changes; when the watch breaks it lists them again.
func (r *runtime) watchPools(ctx context.Context, rev int64) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range r.cfg.Etcd.Watch(wctx, etcdstore.PrefixNodePools, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
			if resp.Err() != nil {
				break
			}
			r.mu.Lock()
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					delete(r.pools, "nodepools/"+strings.TrimPrefix(string(ev.Kv.Key), etcdstore.PrefixNodePools))
				} else if p := r.decodePool(ev.Kv.Key, ev.Kv.Value); p != nil {
					r.pools[p.GetName()] = p
				}
			}
			r.mu.Unlock()
			rev = resp.Header.Revision + 1
			r.requeueNodes()
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		for {
			last, err := r.listPools(ctx)
			if err == nil {
				rev = last + 1
				break
			}
			if ctx.Err() != nil {
				return
			}
			r.log.Warn("kubernetes runtime: list node pools", "err", err)
			time.Sleep(500 * time.Millisecond)
		}
		r.requeueNodes()
	}
}

func (r *runtime) requeueNodes() {
	nodes, err := r.nodes.List(everything)
	if err != nil {
		return
	}
	for _, n := range nodes {
		r.queue.Add(kindNode + ":" + n.Name)
	}
}

// tolerations are what Runway's pods on the Kubernetes node tolerate:
// Config.Tolerations and its pool's.
func (r *runtime) tolerations(kn *corev1.Node) []corev1.Toleration {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := "nodepools/" + kn.Labels[LabelNodePool]
	if kn.Labels[LabelNodePool] == "" {
		name = clusterproto.PoolOf(kn.Labels, slices.Collect(maps.Values(r.pools)))
	}
	out := slices.Clone(r.cfg.Tolerations)
	for _, t := range r.pools[name].GetTolerations() {
		out = append(out, coreToleration(t))
	}
	return out
}

// nodeTolerations are the tolerations of Runway's pods on the Kubernetes
// node of that name; the global ones alone when it is not known.
func (r *runtime) nodeTolerations(node string) []corev1.Toleration {
	kn, err := r.nodes.Get(node)
	if err != nil {
		return r.cfg.Tolerations
	}
	return r.tolerations(kn)
}

// lapseTolerations let Runway's pods stay on a NotReady or unreachable node
// for the scheduler's grace (Config.NodeLostGrace) rather than Kubernetes'
// default 300 s; none when there is no grace.
func (r *runtime) lapseTolerations() []corev1.Toleration {
	if r.cfg.NodeLostGrace <= 0 {
		return nil
	}
	secs := int64((r.cfg.NodeLostGrace + time.Second - 1) / time.Second)
	var out []corev1.Toleration
	for _, key := range lapseTaints {
		out = append(out, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
			Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs})
	}
	return out
}

// lapseTaints are what the node lifecycle controller puts on a node whose
// Ready condition is False or Unknown: its readiness, not a drain (cordon).
var lapseTaints = []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable}

// coreToleration is a pool's toleration as Kubernetes has it.
func coreToleration(t *quotav1.Toleration) corev1.Toleration {
	out := corev1.Toleration{Key: t.GetKey(), Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffect(toleration.Effect(t.GetEffect()))}
	if toleration.Equal(t) {
		out.Operator, out.Value = corev1.TolerationOpEqual, t.GetValue()
	}
	return out
}

// ParseToleration reads KEY[=VALUE][:EFFECT] (toleration.Parse) as a
// Kubernetes toleration: `runway serve --tolerate`.
func ParseToleration(s string) (corev1.Toleration, error) {
	t, err := toleration.Parse(s)
	if err != nil {
		return corev1.Toleration{}, err
	}
	return coreToleration(t), nil
}
