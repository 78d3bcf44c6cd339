package nodemanager

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// agentTokenTTL is how long an issued node agent token lasts; the agent
// asks again before it ends.
const agentTokenTTL = time.Hour

// IssueNodeAgentToken gives the agent of a Kubernetes node its Runway
// token, for the service account token bound to its pod there (NodeKeys
// reviews it, as for GetNodeMarkKey; the method is public to the guard).
func (s *Server) IssueNodeAgentToken(ctx context.Context, req *nodemanagerv1.IssueNodeAgentTokenRequest) (*nodemanagerv1.NodeAgentToken, error) {
	kubeNode := req.GetKubernetesNode()
	if s.nodeKeys == nil || s.tokens == nil {
		return nil, apierr.PermissionDenied("the node agent of this node", "kubernetes/nodes/"+kubeNode).
			With("why", "this NodeManager has no Kubernetes runtime (runway serve nodemanager --runtime kubernetes)")
	}
	node, err := s.nodeKeys.Review(ctx, bearer(ctx), kubeNode)
	if err != nil {
		s.log.Warn("node agent token not given", "kubernetes node", kubeNode, "err", err, "why", apierr.Info(err).GetMetadata()["why"])
		return nil, err
	}
	return s.agentToken(node, agentTokenTTL)
}

// CreateNodeAgentToken mints a node agent's token for an administrator
// (the guard admits system administrators only, and audits the call).
func (s *Server) CreateNodeAgentToken(_ context.Context, req *nodemanagerv1.CreateNodeAgentTokenRequest) (*nodemanagerv1.NodeAgentToken, error) {
	node, err := nodeOf("node", req.GetNode())
	if err != nil {
		return nil, err
	}
	ttl := req.GetTtl().AsDuration()
	if req.GetTtl() != nil && (!req.GetTtl().IsValid() || ttl < time.Minute) {
		return nil, apierr.InvalidField("ttl", "must be at least one minute")
	}
	if s.tokens == nil {
		return nil, apierr.PermissionDenied("nodes.edit", req.GetNode()).With("why", "this NodeManager signs no tokens")
	}
	return s.agentToken(node, ttl)
}

func (s *Server) agentToken(node string, ttl time.Duration) (*nodemanagerv1.NodeAgentToken, error) {
	if ttl == 0 {
		ttl = 1 << 62 // cut to the longest lifetime by the signer
	}
	token, exp, err := s.tokens.IssueNodeAgentToken(node, ttl)
	if err != nil {
		return nil, fmt.Errorf("sign the token of the agent of %s: %w", node, err)
	}
	s.log.Info("node agent token given", "node", node, "expires", exp)
	return &nodemanagerv1.NodeAgentToken{Node: NodeName(node), Token: token, ExpireTime: timestamppb.New(exp)}, nil
}
