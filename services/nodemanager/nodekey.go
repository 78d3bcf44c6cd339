package nodemanager

import (
	"context"
	"strings"

	"google.golang.org/grpc/metadata"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// GetNodeMarkKey hands a node agent in Kubernetes mode the key of its own
// node (Deps.NodeKeys decides whose the caller's token is). The method is
// public to Runway's guard (pkg/auth): its callers hold no Runway token but a
// Kubernetes service account token, which only NodeKeys reads.
func (s *Server) GetNodeMarkKey(ctx context.Context, req *nodemanagerv1.GetNodeMarkKeyRequest) (*nodemanagerv1.NodeMarkKey, error) {
	node := req.GetKubernetesNode()
	if s.nodeKeys == nil {
		return nil, apierr.PermissionDenied("the node agent of this node", "kubernetes/nodes/"+node).
			With("why", "this NodeManager has no Kubernetes runtime (runway serve nodemanager --runtime kubernetes)")
	}
	key, err := s.nodeKeys.NodeKey(ctx, bearer(ctx), node)
	if err != nil {
		s.log.Warn("node mark key not given", "kubernetes node", node, "err", err, "why", apierr.Info(err).GetMetadata()["why"])
		return nil, err
	}
	s.log.Info("node mark key given to the node's agent", "kubernetes node", node)
	return &nodemanagerv1.NodeMarkKey{KubernetesNode: node, Key: key}, nil
}

// bearer is the call's bearer token ("" without one; a value of another
// scheme is no token, which the reviewer refuses).
func bearer(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return ""
	}
	scheme, t, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "invalid"
	}
	return strings.TrimSpace(t)
}
