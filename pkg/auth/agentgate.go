package auth

import (
	"context"
	"crypto/ed25519"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// AgentGate admits the calls a node agent serves (NodeAgentService): only
// the control-plane services it names, by their service tokens, checked
// against the verifying keys alone. A node agent holds no signing key, user,
// rule or session: root on its node reads all it has and can sign nothing
// (the Guard, which signs, runs only in the control plane).
type AgentGate struct {
	keys     *mirror[*identityv1.VerifyingKey]
	now      func() time.Time
	allowed  []string
	verified verifiedTokens
}

// NewAgentGate loads the verifying keys from client; services are the
// principals admitted (services/workload relays pod output). now is
// time.Now when nil.
func NewAgentGate(ctx context.Context, client *clientv3.Client, now func() time.Time, services ...string) (*AgentGate, error) {
	if now == nil {
		now = time.Now
	}
	a := &AgentGate{now: now, allowed: services,
		keys: newMirror(client, etcdstore.PrefixVerifyingKeys, func() *identityv1.VerifyingKey { return new(identityv1.VerifyingKey) })}
	if err := a.keys.load(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// Run follows the verifying keys until ctx ends.
func (a *AgentGate) Run(ctx context.Context) error { return a.keys.run(ctx) }

func (a *AgentGate) verifier(id string) (verifyKey, bool) {
	key, ok := a.keys.get(id)
	if !ok || len(key.GetPublicKey()) != ed25519.PublicKeySize || !key.GetRetireTime().AsTime().After(a.now()) {
		return verifyKey{}, false
	}
	return verifyKey{jwt.SigningMethodEdDSA, ed25519.PublicKey(key.GetPublicKey()), key.GetPublicKey()}, true
}

// admit checks the call's token: a service token of an admitted service,
// for a method of the NodeAgentService (health and reflection need none).
func (a *AgentGate) admit(ctx context.Context, method string) error {
	if probe(method) {
		return nil // health and reflection, as the Guard serves them
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 || vals[0] == "" {
		return apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_MISSING)
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID)
	}
	c, err := verifySignature(strings.TrimSpace(token), a.now(), a.verifier, &a.verified)
	if err != nil {
		return apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID)
	}
	// A user's token is genuine but not enough: the agent cannot tell who
	// may view which workload, so only the workload service, which can,
	// is served.
	if c.Type != ServiceToken || !strings.HasPrefix(method, agentSvc) || !slices.Contains(a.allowed, c.Subject) {
		return apierr.PermissionDenied("the node agent's service", method)
	}
	return nil
}

// UnaryInterceptor is the agent's grpcserver.Config.Auth.
func (a *AgentGate) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := a.admit(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// StreamInterceptor is the agent's grpcserver.Config.AuthStream.
func (a *AgentGate) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := a.admit(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}
