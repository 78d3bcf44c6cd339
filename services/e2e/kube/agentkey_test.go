package kube_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runwayhq/runway/cmd/runway/server"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
)

// TestAgentCommandNodeKey: `runway agent --runtime kubernetes` as the
// chart runs it (server.RunAgent) gets its node's mark key from
// --nodemanager-server with the token in --kube-token-file and runs; given
// the token of another node's agent pod, it stops at once with the
// service's PERMISSION_DENIED, and without --nodemanager-server it does
// not start.
func TestAgentCommandNodeKey(t *testing.T) {
	e := newEnv(t, "akey")
	e.nodes(t, kwoktest.Node{Name: "akey-node-1"}, kwoktest.Node{Name: "akey-node-2"})
	e.start(t)
	_, tok1, err := cluster.AgentPod(t.Context(), e.ns, server.DefaultAgentServiceAccount, "akey-node-1")
	if err != nil {
		t.Fatal(err)
	}
	tokens := t.TempDir()
	file := filepath.Join(tokens, "token")
	if err := os.WriteFile(file, []byte(tok1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, node, nodeManager string) (string, error) {
		var log strings.Builder
		err := server.RunAgent(ctx, server.AgentConfig{Node: node, Runtime: server.RuntimeKubernetes, Kubeconfig: cluster.Kubeconfig,
			KubeNamespace: e.ns, EtcdEndpoints: []string{"unix://" + filepath.Join(e.dir, "etcd", "client.sock")},
			GPUBackend: server.BackendSimulated, ProcRoot: t.TempDir(), CgroupRoot: t.TempDir(),
			NodeManagerServer: nodeManager, KubeTokenFile: file, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		return log.String(), err
	}
	ctx, cancel := context.WithCancel(t.Context())
	stopped := time.AfterFunc(3*time.Second, cancel) // as SIGTERM does
	defer stopped.Stop()
	if log, err := run(ctx, "akey-node-1", e.addr); err != nil || !strings.Contains(log, "node agent: Kubernetes mode") {
		t.Errorf("node 1's agent with its own token: %v; log %s", err, log)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log, err := run(ctx, "akey-node-2", e.addr)
	if err == nil || !strings.Contains(err.Error(), "PermissionDenied") || ctx.Err() != nil {
		t.Errorf("node 2's agent with node 1's token: %v, want PermissionDenied at once; log %s", err, log)
	}
	if _, err := run(t.Context(), "akey-node-1", ""); err == nil || !strings.Contains(err.Error(), "--nodemanager-server") {
		t.Errorf("the agent without --nodemanager-server: %v, want an error naming it", err)
	}
}
