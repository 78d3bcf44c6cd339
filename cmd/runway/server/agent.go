package server

import (
	"context"
	"errors"
	"log/slog"

	"github.com/runwayhq/runway/pkg/gpu/simulated"
	"github.com/runwayhq/runway/services/nodemanager/agent"
)

// AgentConfig is one node agent (`runway agent`).
type AgentConfig struct {
	// Node is the node id. Required.
	Node string
	// EtcdEndpoints are the etcd client endpoints. Required.
	EtcdEndpoints []string
	// EtcdTLS, when set, connects to etcd over TLS.
	EtcdTLS EtcdTLS
	// GPUs is the number of simulated GPUs. (Real NVIDIA devices need the
	// NVML backend, which is not wired yet.)
	GPUs int
	// Pool is the node pool id; when empty the node manager picks the pool
	// whose selector Labels match (else the default pool).
	Pool string
	// Labels are the node's labels (run.ai/type for node types, pool selectors).
	Labels map[string]string
	// DataDir holds the pods' directories and logs. Required.
	DataDir string
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// RunAgent connects to etcd and runs the agent until ctx ends; it returns
// nil then, or the agent's error.
func RunAgent(ctx context.Context, cfg AgentConfig) error {
	if cfg.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	cli, err := newEtcdClient(cfg.EtcdEndpoints, cfg.EtcdTLS)
	if err != nil {
		return err
	}
	defer cli.Close()
	err = agent.Run(ctx, agent.Config{Node: cfg.Node, Pool: cfg.Pool, Labels: cfg.Labels, Client: cli, DataDir: cfg.DataDir,
		Backend: simulated.New(simulated.Config{Count: cfg.GPUs, Node: cfg.Node}), Logger: cfg.Logger})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil
	}
	return err
}
