package nodemanager_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/services/nodemanager"
)

// A node whose agent names no pool joins the oldest pool whose node selector
// its labels match, else the default pool; the answer is in its node key.
func TestRegisterNode_poolFromLabels(t *testing.T) {
	etcd := etcdtest.New(t)
	ctx := t.Context()
	pools := etcdstore.NewCollection(etcd.Client, etcdstore.PrefixNodePools, func() *quotav1.NodePool { return new(quotav1.NodePool) })
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, p := range []*quotav1.NodePool{
		{Name: "nodepools/a100", NodeSelector: map[string]string{"gpu": "a100"}},
		{Name: "nodepools/dgx", NodeSelector: map[string]string{"run.ai/type": "dgx"}},
		{Name: "nodepools/dgx-late", NodeSelector: map[string]string{"run.ai/type": "dgx"}},
	} {
		p.CreateTime = timestamppb.New(created.Add(time.Duration(i) * time.Hour))
		if _, err := pools.Create(ctx, p.GetName()[len("nodepools/"):], p); err != nil {
			t.Fatal(err)
		}
	}
	nodes := etcdstore.NewCollection(etcd.Client, etcdstore.PrefixNodes, func() *nodemanagerv1.Node { return new(nodemanagerv1.Node) })
	tests := map[string]struct {
		node     string
		pool     string
		labels   map[string]string
		wantPool string
	}{
		"labels matching a selector pick that pool":  {node: "n1", labels: map[string]string{"gpu": "a100"}, wantPool: "nodepools/a100"},
		"two matching pools: the older one wins":     {node: "n2", labels: map[string]string{"run.ai/type": "dgx"}, wantPool: "nodepools/dgx"},
		"no matching selector: the default pool":     {node: "n3", labels: map[string]string{"gpu": "t4"}, wantPool: "nodepools/default"},
		"a pool named by the agent wins over labels": {node: "n4", pool: "nodepools/dgx-late", labels: map[string]string{"gpu": "a100"}, wantPool: "nodepools/dgx-late"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lease, err := etcd.Client.Grant(ctx, 30)
			if err != nil {
				t.Fatal(err)
			}
			n := &nodemanagerv1.Node{Name: "nodes/" + tc.node, NodePool: tc.pool, Labels: tc.labels,
				Readiness: nodemanagerv1.Readiness_READINESS_READY}
			if err := nodemanager.RegisterNode(ctx, etcd.Client, n, lease.ID); err != nil {
				t.Fatal(err)
			}
			got, err := nodes.Get(ctx, tc.node)
			if err != nil {
				t.Fatal(err)
			}
			if got.Msg.GetNodePool() != tc.wantPool {
				t.Errorf("node_pool: want %s, got %s", tc.wantPool, got.Msg.GetNodePool())
			}
		})
	}
}
