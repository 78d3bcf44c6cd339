package nodemanager

import (
	"context"
	"strings"

	"google.golang.org/grpc/metadata"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
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
	md, _ := metadata.FromIncomingContext(ctx)
	token := ""
	if vals := md.Get("authorization"); len(vals) > 0 {
		scheme, t, ok := strings.Cut(vals[0], " ")
		if !ok || !strings.EqualFold(scheme, "bearer") {
			return nil, apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID)
		}
		token = strings.TrimSpace(t)
	}
	key, err := s.nodeKeys.NodeKey(ctx, token, node)
	if err != nil {
		s.log.Warn("node mark key not given", "kubernetes node", node, "err", err, "why", apierr.Info(err).GetMetadata()["why"])
		return nil, err
	}
	s.log.Info("node mark key given to the node's agent", "kubernetes node", node)
	return &nodemanagerv1.NodeMarkKey{KubernetesNode: node, Key: key}, nil
}
