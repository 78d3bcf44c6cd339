package auth

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// TestVerifiedTokensStillRevoked: a token accepted once (and so cached as
// verified) is refused as soon as its user's credentials change or the
// user is deleted, once it expires, and once its key is deleted; a token
// changed by one character is refused though the original is cached.
func TestVerifiedTokensStillRevoked(t *testing.T) {
	g, c, cluster := newGuard(t, Config{Rotation: time.Hour, MaxTokenTTL: 2 * time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	putUser := func(gen int64) {
		t.Helper()
		b, err := proto.Marshal(&identityv1.StoredUser{User: &identityv1.User{Name: "users/alice", Uid: "u-1"}, CredentialGeneration: gen})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cluster.Client.Put(ctx, etcdstore.PrefixUsers+"alice", string(b)); err != nil {
			t.Fatal(err)
		}
		if err := g.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	accepted := func(token string) bool {
		t.Helper()
		_, err := g.parse(t.Context(), token, AccessToken)
		return err == nil
	}
	issue := func(ttl time.Duration) string {
		t.Helper()
		tok, _, err := g.Issue(Subject{Principal: "users/alice", UID: "u-1", Gen: 1}, AccessToken, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	putUser(1)
	tok := issue(time.Hour)
	if !accepted(tok) || !accepted(tok) {
		t.Fatal("a valid token refused")
	}
	if _, ok := g.verified.get(tok, c.now(), g.keys.verifier); !ok {
		t.Fatal("an accepted token is not cached: the test would not test the cache")
	}
	forged := []byte(tok)
	forged[len(forged)/2] ^= 1
	if accepted(string(forged)) {
		t.Error("a token changed by one character accepted")
	}

	putUser(2) // a password reset: the credential generation moves on
	if accepted(tok) {
		t.Error("a cached token accepted after its user's credentials changed")
	}
	putUser(1)
	if !accepted(tok) {
		t.Fatal("the token refused with the credentials it was issued for")
	}
	if _, err := cluster.Client.Delete(ctx, etcdstore.PrefixUsers+"alice"); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if accepted(tok) {
		t.Error("a cached token accepted after its user was deleted")
	}

	putUser(1)
	short := issue(time.Minute)
	if !accepted(short) {
		t.Fatal("a valid token refused")
	}
	c.add(time.Minute)
	if accepted(short) {
		t.Error("a cached token accepted at its expiry")
	}

	// A signing key deleted from etcd (revoked by hand) verifies nothing.
	tok = issue(time.Hour)
	if !accepted(tok) {
		t.Fatal("a valid token refused")
	}
	key, _ := g.keys.signer()
	if _, err := cluster.Client.Delete(ctx, etcdstore.PrefixSigningKeys+key.GetId()); err != nil {
		t.Fatal(err)
	}
	if err := g.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if accepted(tok) {
		t.Error("a cached token accepted after its key was deleted")
	}
}

// BenchmarkParseServiceToken is the authentication of one call with a
// token the guard has seen (what each call of a service or the SDK costs),
// and, for comparison, with the verified-token cache emptied each time.
func BenchmarkParseServiceToken(b *testing.B) {
	g, _, _ := newGuard(b, Config{})
	tok, _, err := g.Issue(Subject{Principal: "services/workload"}, ServiceToken, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("seen", func(b *testing.B) {
		for b.Loop() {
			if _, err := g.parse(b.Context(), tok, AccessToken); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			g.verified = verifiedTokens{}
			if _, err := g.parse(b.Context(), tok, AccessToken); err != nil {
				b.Fatal(err)
			}
		}
	})
}
