package kube_test

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
)

const (
	gpuWorkerLabel = "node-role.kubernetes.io/runai-gpu-worker"
	cpuWorkerLabel = "node-role.kubernetes.io/runai-cpu-worker"
	systemLabel    = "node-role.kubernetes.io/runai-system"
)

// TestNodeRoles: in Kubernetes mode a node's roles are its
// node-role.kubernetes.io/runai-* labels, on a real apiserver: read at
// registration (GPU trainings then go only to the labelled gpu-worker),
// written by SetNodeRoles (the label added, then removed, and the roles key
// gone once the labels agree), and a label put with the Kubernetes API
// afterwards is honoured.
func TestNodeRoles(t *testing.T) {
	e := newEnv(t, "rl")
	e.nodes(t, kwoktest.Node{Name: "rl-node-1", GPUs: 2, Labels: map[string]string{gpuWorkerLabel: "true"}},
		kwoktest.Node{Name: "rl-node-2", GPUs: 2})
	e.start(t)
	e.project(t, "team-r", 4)

	e.nodeRoles(t, "rl-node-1", nodemanagerv1.NodeRole_NODE_ROLE_GPU_WORKER)
	e.nodeRoles(t, "rl-node-2")
	e.training(t, "team-r", "train", 2, 1)
	for _, p := range e.bound(t, "train", 2) {
		if p.Spec.NodeName != "rl-node-1" {
			t.Errorf("pod %s on %s, want rl-node-1, the only gpu-worker", p.Name, p.Spec.NodeName)
		}
	}

	nm := e.rw.NodeManagerService
	if _, err := nm.SetNodeRoles(t.Context(), &nodemanagerv1.SetNodeRolesRequest{Name: "nodes/rl-node-2",
		Roles: []nodemanagerv1.NodeRole{nodemanagerv1.NodeRole_NODE_ROLE_CPU_WORKER}}); err != nil {
		t.Fatal(err)
	}
	e.nodeLabels(t, "rl-node-2", map[string]string{cpuWorkerLabel: "true"}, gpuWorkerLabel, systemLabel)
	e.nodeRoles(t, "rl-node-2", nodemanagerv1.NodeRole_NODE_ROLE_CPU_WORKER)
	e.rolesKeyGone(t, "rl-node-2")

	if _, err := nm.SetNodeRoles(t.Context(), &nodemanagerv1.SetNodeRolesRequest{Name: "nodes/rl-node-1"}); err != nil {
		t.Fatal(err)
	}
	e.nodeLabels(t, "rl-node-1", nil, gpuWorkerLabel, cpuWorkerLabel, systemLabel)
	e.nodeRoles(t, "rl-node-1")
	e.rolesKeyGone(t, "rl-node-1")

	// An administrator's own label, with the Kubernetes API.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, systemLabel)
	if _, err := e.kube.CoreV1().Nodes().Patch(t.Context(), "rl-node-2", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.nodeRoles(t, "rl-node-2", nodemanagerv1.NodeRole_NODE_ROLE_SYSTEM, nodemanagerv1.NodeRole_NODE_ROLE_CPU_WORKER)
}

// nodeRoles waits until Runway's node has exactly roles.
func (e *env) nodeRoles(t *testing.T, node string, roles ...nodemanagerv1.NodeRole) {
	t.Helper()
	eventually(t, fmt.Sprintf("node %s with roles %v", node, roles), func() string {
		n, err := e.rw.GetNode(t.Context(), node)
		if err != nil {
			return err.Error()
		}
		if !slices.Equal(n.GetRoles(), roles) {
			return fmt.Sprintf("roles %v", n.GetRoles())
		}
		return ""
	})
}

// nodeLabels waits until the Kubernetes node has the labels want and none
// of absent that want does not name.
func (e *env) nodeLabels(t *testing.T, node string, want map[string]string, absent ...string) {
	t.Helper()
	eventually(t, "labels of Kubernetes node "+node, func() string {
		kn, err := e.kube.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		for k, v := range want {
			if kn.Labels[k] != v {
				return fmt.Sprintf("labels %v, want %s=%s", kn.Labels, k, v)
			}
		}
		for _, k := range absent {
			if _, ok := kn.Labels[k]; ok && want[k] == "" {
				return fmt.Sprintf("labels %v, want no %s", kn.Labels, k)
			}
		}
		return ""
	})
}

// rolesKeyGone waits until the runtime has deleted the node's roles key
// (the labels are the truth again).
func (e *env) rolesKeyGone(t *testing.T, node string) {
	t.Helper()
	eventually(t, "roles key of "+node+" deleted", func() string {
		resp, err := e.etcdClient(t).Get(t.Context(), etcdstore.PrefixNodeRoles+node)
		if err != nil {
			return err.Error()
		}
		if len(resp.Kvs) != 0 {
			return "still there"
		}
		return ""
	})
}
