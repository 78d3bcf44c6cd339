package auth

import (
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// A node agent's gate admits the workload service's token with the public
// halves of the signing keys alone, and nothing a hostile node or tenant
// can make: a user's genuine token, another service's, a token signed with
// the public key as an HMAC secret (the algorithm confusion of JWT), an
// unsigned one, or one signed by a key the platform does not have.
func TestAgentGateAdmitsOnlyTheWorkloadService(t *testing.T) {
	g, clk, cluster := newGuard(t, Config{})
	gate, err := NewAgentGate(t.Context(), cluster.Client, clk.now, "services/workload")
	if err != nil {
		t.Fatal(err)
	}
	// What the gate read is public keys only.
	resp, err := cluster.Client.Get(t.Context(), etcdstore.PrefixVerifyingKeys, clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("verifying keys: %v, %d", err, len(resp.Kvs))
	}
	var half identityv1.VerifyingKey
	if err := proto.Unmarshal(resp.Kvs[0].Value, &half); err != nil || len(half.GetPublicKey()) != ed25519.PublicKeySize {
		t.Fatalf("a verifying key: %v %v", &half, err)
	}
	issue := func(principal string, typ TokenType) string {
		tok, _, err := g.Issue(Subject{Principal: principal}, typ, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	sign := func(method jwt.SigningMethod, key any) string {
		tk := jwt.NewWithClaims(method, claims{RegisteredClaims: jwt.RegisteredClaims{Issuer: issuer, Subject: "services/workload",
			ExpiresAt: jwt.NewNumericDate(clk.now().Add(time.Hour))}, Type: ServiceToken})
		tk.Header["kid"] = half.GetId()
		s, err := tk.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	_, stranger, _ := ed25519.GenerateKey(nil)
	const logs = "/runway.nodemanager.v1.NodeAgentService/ReadPodLogs"
	for _, c := range []struct {
		name, token, method string
		want                codes.Code
	}{
		{"the workload service", issue("services/workload", ServiceToken), logs, codes.OK},
		{"the workload service, a method it does not serve", issue("services/workload", ServiceToken), "/runway.quota.v1.QuotaService/ListProjects", codes.PermissionDenied},
		{"another service", issue("services/scheduler", ServiceToken), logs, codes.PermissionDenied},
		{"a user's access token", issue("users/admin", AccessToken), logs, codes.PermissionDenied},
		{"HS256 with the public key as its secret", sign(jwt.SigningMethodHS256, half.GetPublicKey()), logs, codes.Unauthenticated},
		{"unsigned", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType), logs, codes.Unauthenticated},
		{"a key the platform does not have", sign(jwt.SigningMethodEdDSA, stranger), logs, codes.Unauthenticated},
		{"no token", "", logs, codes.Unauthenticated},
	} {
		ctx := t.Context()
		if c.token != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+c.token))
		}
		if got := apierr.Code(gate.admit(ctx, c.method)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// A key retires: its tokens stop working at the agent too.
	tok := issue("services/workload", ServiceToken)
	clk.add(DefaultRotation + DefaultMaxTokenTTL + time.Minute)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
	if got := apierr.Code(gate.admit(ctx, logs)); got != codes.Unauthenticated {
		t.Errorf("a token of a retired key: %v, want Unauthenticated", got)
	}
}
