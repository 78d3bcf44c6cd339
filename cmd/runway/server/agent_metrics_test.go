package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runwayhq/runway/cmd/runway/server"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// The agent's metrics name the projects and workloads of its pods: off
// loopback it serves them only behind a token.
func TestRunAgent_metricsOffLoopbackNeedAToken(t *testing.T) {
	c := etcdtest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	err := server.RunAgent(ctx, server.AgentConfig{Node: "n1", EtcdEndpoints: []string{c.Endpoint}, DataDir: t.TempDir(),
		GPUBackend: server.BackendSimulated, GPUs: 1, MetricsListen: "0.0.0.0:0", Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "--metrics-token-file") {
		t.Errorf("RunAgent with --metrics-listen 0.0.0.0:0 and no token: %v, want a refusal naming --metrics-token-file", err)
	}
}
