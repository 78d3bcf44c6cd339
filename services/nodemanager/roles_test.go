package nodemanager_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

var (
	gpuWorker = nodemanagerv1.NodeRole_NODE_ROLE_GPU_WORKER
	cpuWorker = nodemanagerv1.NodeRole_NODE_ROLE_CPU_WORKER
	system    = nodemanagerv1.NodeRole_NODE_ROLE_SYSTEM
)

// Node roles through the API: set (sorted, in the node key readers see,
// lease kept), kept when the agent registers again, replaced, cleared; bad
// roles and stale etags refused with the field named.
func TestNodeRoles_surviveReregistration(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	a := e.startAgent(t, "node-1", nil)
	before := e.registered(t, "node-1")

	_, err := e.client.SetNodeRoles(ctx, &nodemanagerv1.SetNodeRolesRequest{Name: "nodes/node-1", Etag: "1"})
	wantError(t, err, codes.Aborted, "ETAG_MISMATCH")
	_, err = e.client.SetNodeRoles(ctx, &nodemanagerv1.SetNodeRolesRequest{Name: "nodes/node-9", Roles: []nodemanagerv1.NodeRole{gpuWorker}})
	wantError(t, err, codes.NotFound, "NODE_NOT_FOUND")
	for _, bad := range [][]nodemanagerv1.NodeRole{{nodemanagerv1.NodeRole_NODE_ROLE_UNSPECIFIED}, {gpuWorker, gpuWorker}, {99}} {
		_, err = e.client.SetNodeRoles(ctx, &nodemanagerv1.SetNodeRolesRequest{Name: "nodes/node-1", Roles: bad})
		wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	}

	set, err := e.client.SetNodeRoles(ctx, &nodemanagerv1.SetNodeRolesRequest{Name: "nodes/node-1",
		Roles: []nodemanagerv1.NodeRole{cpuWorker, gpuWorker}, Etag: before.GetEtag()})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.GetRoles(), []nodemanagerv1.NodeRole{gpuWorker, cpuWorker}) {
		t.Errorf("roles = %v, want gpu-worker, cpu-worker (sorted)", set.GetRoles())
	}
	stored, lease := e.storedNode(t, "node-1")
	if len(stored.GetRoles()) != 2 {
		t.Errorf("stored node roles = %v", stored.GetRoles())
	}
	if lease == 0 {
		t.Error("SetNodeRoles dropped the node key's lease")
	}

	a.kill(t)
	e.gone(t, "node-1")
	e.startAgent(t, "node-1", nil)
	if after := e.registered(t, "node-1"); len(after.GetRoles()) != 2 {
		t.Errorf("re-registered node roles = %v, want both kept", after.GetRoles())
	}
	if n, err := e.client.SetNodeRoles(ctx, &nodemanagerv1.SetNodeRolesRequest{Name: "nodes/node-1",
		Roles: []nodemanagerv1.NodeRole{system}}); err != nil || !slices.Equal(n.GetRoles(), []nodemanagerv1.NodeRole{system}) {
		t.Fatalf("replace: %v, %v", n, err)
	}
	if n, err := e.client.SetNodeRoles(ctx, &nodemanagerv1.SetNodeRolesRequest{Name: "nodes/node-1"}); err != nil || len(n.GetRoles()) != 0 {
		t.Fatalf("clear: %v, %v", n, err)
	}
	got, err := e.client.GetNode(ctx, &nodemanagerv1.GetNodeRequest{Name: "nodes/node-1"})
	if err != nil || len(got.GetRoles()) != 0 {
		t.Fatalf("GetNode after clearing: %v, %v", got, err)
	}
}

// storedNode reads a node key as readers of etcd see it, with its lease.
func (e *env) storedNode(t *testing.T, id string) (*nodemanagerv1.Node, int64) {
	t.Helper()
	resp, err := e.etcd.Client.Get(t.Context(), etcdstore.PrefixNodes+id)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("node key: %v %v", resp, err)
	}
	n := new(nodemanagerv1.Node)
	if err := proto.Unmarshal(resp.Kvs[0].Value, n); err != nil {
		t.Fatal(err)
	}
	return n, resp.Kvs[0].Lease
}
