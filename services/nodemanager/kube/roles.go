package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/nodemanager"
)

// Node roles in Kubernetes mode are the node's labels, the ones the product
// uses (any value but "false" means the role; Runway writes "true"):
// nodeOf reads them into Node.roles. SetNodeRoles writes the roles key
// (nodemanager.RolesKey), which this runtime watches: it patches the node's
// labels to match, and once its informer shows them it deletes the key, so
// the labels are the truth again and a later `kubectl label` is honoured.
// While the key is there it wins (RegisterNode copies it), so the roles do
// not flap while the labels catch up.

// roleLabels are the node-role labels by role.
var roleLabels = []struct {
	role  nodemanagerv1.NodeRole
	label string
}{
	{nodemanagerv1.NodeRole_NODE_ROLE_SYSTEM, "node-role.kubernetes.io/runai-system"},
	{nodemanagerv1.NodeRole_NODE_ROLE_GPU_WORKER, "node-role.kubernetes.io/runai-gpu-worker"},
	{nodemanagerv1.NodeRole_NODE_ROLE_CPU_WORKER, "node-role.kubernetes.io/runai-cpu-worker"},
}

// rolesOf are the roles a node's labels give it, in the API's order.
func rolesOf(labels map[string]string) []nodemanagerv1.NodeRole {
	var out []nodemanagerv1.NodeRole
	for _, rl := range roleLabels {
		if v, ok := labels[rl.label]; ok && !strings.EqualFold(v, "false") {
			out = append(out, rl.role)
		}
	}
	return out
}

// syncRoles applies the node's roles key, if any, to its labels: a patch
// when they differ (the informer's update brings the node back), else the
// key deleted. It reports whether the labels are being changed, in which
// case the caller registers nothing yet.
func (r *runtime) syncRoles(ctx context.Context, kn *corev1.Node, id string) (bool, error) {
	resp, err := r.cfg.Etcd.Get(ctx, nodemanager.RolesKey(id))
	if err != nil {
		return false, fmt.Errorf("kube: read the roles of node %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	want := new(nodemanagerv1.SetNodeRolesRequest)
	if err := proto.Unmarshal(resp.Kvs[0].Value, want); err != nil {
		return false, fmt.Errorf("kube: the roles of node %s: %w", id, err)
	}
	if slices.Equal(rolesOf(kn.Labels), want.GetRoles()) {
		// Only the version read: a newer SetNodeRoles keeps its key.
		_, err := r.cfg.Etcd.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(nodemanager.RolesKey(id)), "=", resp.Kvs[0].ModRevision)).
			Then(clientv3.OpDelete(nodemanager.RolesKey(id))).Commit()
		return false, err
	}
	labels := map[string]any{}
	for _, rl := range roleLabels {
		if slices.Contains(want.GetRoles(), rl.role) {
			labels[rl.label] = "true"
		} else if _, ok := kn.Labels[rl.label]; ok {
			labels[rl.label] = nil // a merge patch's null removes it
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return false, err
	}
	if _, err := r.cfg.Kube.CoreV1().Nodes().Patch(ctx, kn.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return false, fmt.Errorf("kube: label node %s with its roles: %w", kn.Name, err)
	}
	r.log.Info("kubernetes runtime: node roles written to its labels", "node", kn.Name, "roles", want.GetRoles())
	return true, nil
}

// watchRoles enqueues a node whenever its roles key is written, from rev
// on; when the watch breaks it lists the keys again.
func (r *runtime) watchRoles(ctx context.Context, rev int64) {
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range r.cfg.Etcd.Watch(wctx, etcdstore.PrefixNodeRoles, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypePut {
					r.enqueueRoles(strings.TrimPrefix(string(ev.Kv.Key), etcdstore.PrefixNodeRoles))
				}
			}
			rev = resp.Header.Revision + 1
		}
		cancel()
		for ctx.Err() == nil {
			last, err := r.listRoles(ctx)
			if err == nil {
				rev = last + 1
				break
			}
			r.log.Warn("kubernetes runtime: list node roles", "err", err)
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// listRoles enqueues every node with a roles key and returns the revision
// to watch from.
func (r *runtime) listRoles(ctx context.Context) (int64, error) {
	resp, err := r.cfg.Etcd.Get(ctx, etcdstore.PrefixNodeRoles, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("kube: list node roles: %w", err)
	}
	for _, kv := range resp.Kvs {
		r.enqueueRoles(strings.TrimPrefix(string(kv.Key), etcdstore.PrefixNodeRoles))
	}
	return resp.Header.Revision, nil
}

func (r *runtime) enqueueRoles(id string) {
	name, err := r.kubeNode(id)
	if errors.Is(err, errNoNode) {
		return // not (yet) a Kubernetes node: its registration reads the key
	}
	if err == nil {
		r.queue.Add(kindNode + ":" + name)
	}
}
