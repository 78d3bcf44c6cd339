package auth

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// nodeAgentPrefix starts the principal of a node agent,
// services/agent/nodes/{node}: a service principal that is one node's.
const nodeAgentPrefix = "services/agent/"

// NodeAgentCredentials are the per-call credentials of the agent of node
// (`nodes/{node}`): a service token of services/agent/nodes/{node}, the
// only principal that may open the credentials of the pods bound to that
// node (CredentialService.ResolvePodCredentials).
func (g *Guard) NodeAgentCredentials(node string) credentials.PerRPCCredentials {
	return &serviceCreds{g: g, principal: NodeAgentPrincipal(node)}
}

// IssueNodeAgentToken signs the token of the agent of node (`nodes/{node}`
// or the bare id) for ttl (cut to the longest token lifetime): what the
// NodeManagerService hands an agent that proved which node it is.
func (g *Guard) IssueNodeAgentToken(node string, ttl time.Duration) (string, time.Time, error) {
	if !strings.HasPrefix(node, "nodes/") {
		node = "nodes/" + node
	}
	return g.Issue(Subject{Principal: NodeAgentPrincipal(node)}, ServiceToken, ttl)
}

// IsNodeAgent reports whether principal is a node agent's: a service
// principal with none of a control-plane service's permissions.
func IsNodeAgent(principal string) bool { return strings.HasPrefix(principal, nodeAgentPrefix) }

// NodeAgentsCredentials are the per-call credentials of a runtime that
// plays the agents of many nodes (the Kubernetes runtime): each call's
// context names the node (ForNode), and the call carries a token of that
// node's agent, which opens only the credentials of pods bound to that
// node. A call whose context names none fails before it is sent.
func (g *Guard) NodeAgentsCredentials() credentials.PerRPCCredentials {
	return &perCallCreds{g: g, tokens: map[string]*serviceCreds{}, principal: func(ctx context.Context) (string, error) {
		node, _ := ctx.Value(nodeKey{}).(string)
		if id, ok := strings.CutPrefix(node, "nodes/"); !ok || id == "" || strings.Contains(id, "/") {
			return "", errors.New("a node agent's call names its node: the call's context names none (auth.ForNode)")
		}
		return NodeAgentPrincipal(node), nil
	}}
}

type nodeKey struct{}

// ForNode names the node (nodes/{n}) whose agent the calls made with ctx
// act as, through NodeAgentsCredentials.
func ForNode(ctx context.Context, node string) context.Context {
	return context.WithValue(ctx, nodeKey{}, node)
}

// NodeAgentPrincipal is the principal of the agent of node (`nodes/{node}`).
func NodeAgentPrincipal(node string) string { return nodeAgentPrefix + node }

// checkNodeAgent: credentials' values go to a node's own agent only, and
// only for its node (the service checks the pod is bound there): not to
// users, whatever they hold, nor to another service.
func checkNodeAgent(_ context.Context, _ *Guard, c Caller, req any) error {
	node := req.(*workloadv1.ResolvePodCredentialsRequest).GetNode()
	if !strings.HasPrefix(node, "nodes/") || c.Principal != NodeAgentPrincipal(node) {
		return apierr.PermissionDenied("credentials.resolve", req.(*workloadv1.ResolvePodCredentialsRequest).GetWorkload())
	}
	return nil
}
