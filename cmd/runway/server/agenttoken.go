package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
)

// The node agent signs nothing: its Runway token (services/agent/nodes/
// {node}, which opens the credentials of its node's pods) comes from the
// control plane, by one of two ways (agentCredentials).

// agentCredentials are the per-call credentials the agent presents to the
// workload service: the token in AgentTokenFile (runway admin node-token),
// or one the NodeManagerService issues for its Kubernetes service account
// token (IssueNodeAgentToken), renewed before it expires.
func (cfg AgentConfig) agentCredentials() (creds credentials.PerRPCCredentials, closeFn func(), err error) {
	switch {
	case cfg.AgentTokenFile != "":
		return tokenFile{cfg.AgentTokenFile, "--agent-token-file"}, func() {}, nil
	case cfg.NodeManagerServer != "":
		conn, err := cfg.dialNodeManager()
		if err != nil {
			return nil, nil, err
		}
		return &issuedToken{nm: nodemanagerv1.NewNodeManagerServiceClient(conn), node: cfg.KubeNode()},
			func() { conn.Close() }, nil
	}
	return nil, nil, errors.New("--workload-server needs the agent's Runway token: --agent-token-file (runway admin node-token NODE) " +
		"or --nodemanager-server with its Kubernetes service account token (--kube-token-file)")
}

// KubeNode is the Kubernetes node the agent's pod runs on: --node, which
// the chart sets from the pod's spec.nodeName.
func (cfg AgentConfig) KubeNode() string { return cfg.Node }

// issuedToken asks the NodeManagerService for the node's token and keeps
// it until a quarter of its life is left.
type issuedToken struct {
	nm   nodemanagerv1.NodeManagerServiceClient
	node string

	mu    sync.Mutex
	token string
	exp   time.Time
	life  time.Duration
}

func (t *issuedToken) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token == "" || time.Now().After(t.exp.Add(-t.life/4)) {
		resp, err := t.nm.IssueNodeAgentToken(ctx, &nodemanagerv1.IssueNodeAgentTokenRequest{KubernetesNode: t.node}, grpc.WaitForReady(true))
		if err != nil {
			return nil, fmt.Errorf("the node agent's token (NodeManagerService.IssueNodeAgentToken): %w", err)
		}
		t.token, t.exp = resp.GetToken(), resp.GetExpireTime().AsTime()
		t.life = time.Until(t.exp)
	}
	return map[string]string{"authorization": "Bearer " + t.token}, nil
}

func (*issuedToken) RequireTransportSecurity() bool { return false }
