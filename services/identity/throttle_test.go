package identity_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/identity"
)

// The sign-in throttle holds across replicas (two identity servers on one
// etcd count the same failures), keeps at most its limit per key under
// hashed keys whatever the caller sends, and forgets by itself: every
// failure is leased, and after the window sign-in works again.
func TestThrottleAcrossReplicasBoundedAndExpiring(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "ivy")
	replica, err := identity.New(identity.Config{}, identity.Deps{Client: e.etcd, Guard: e.guard, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	login := func(i int, password string) error {
		req := &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
			Password: &identityv1.PasswordCredentials{User: "ivy", Password: password}}}
		if i%2 == 0 {
			_, err := e.client(t, "").Login(t.Context(), req)
			return err
		}
		_, err := replica.Login(t.Context(), req)
		return err
	}
	for i := range 5 {
		wantCode(t, fmt.Sprintf("wrong password %d", i+1), login(i, "wrong password"), codes.Unauthenticated, "CREDENTIALS_INVALID")
	}
	for i := range 2 {
		wantCode(t, "the right password after 5 failures on two replicas", login(i, pw), codes.ResourceExhausted, "TOO_MANY_SIGN_IN_ATTEMPTS")
	}

	// Attacker-chosen keys: long, many, repeated.
	for i := range 50 {
		user := strings.Repeat(fmt.Sprintf("u%d-", i%5), 1000)
		_, _ = replica.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
			Password: &identityv1.PasswordCredentials{User: user, Password: "x"}}})
	}
	resp, err := e.etcd.Get(t.Context(), etcdstore.PrefixSignInFailures, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string]int{}
	for _, kv := range resp.Kvs {
		k := strings.TrimPrefix(string(kv.Key), etcdstore.PrefixSignInFailures)
		if len(k) > 64 {
			t.Errorf("throttle key %q is %d bytes", k, len(k))
		}
		hash, _, _ := strings.Cut(k, "/")
		perKey[hash]++
		if kv.Lease == 0 {
			t.Errorf("throttle key %s has no lease", k)
			continue
		}
		ttl, err := e.etcd.TimeToLive(t.Context(), clientv3.LeaseID(kv.Lease))
		if err != nil || ttl.TTL <= 0 || time.Duration(ttl.TTL)*time.Second > 5*time.Minute+2*time.Minute {
			t.Errorf("throttle key %s: lease %v, %v", k, ttl, err)
		}
	}
	// The failures over gRPC also count against their address, 127.0.0.1.
	if len(perKey) != 7 {
		t.Errorf("%d throttled keys, want 7 (ivy, five attackers and the address)", len(perKey))
	}
	for k, n := range perKey {
		if n > 5 {
			t.Errorf("key %s holds %d failures, more than the limit", k, n)
		}
	}

	// After the window, ivy signs in again, on either replica.
	e.clock.Add(5*time.Minute + time.Second)
	if err := login(1, pw); err != nil {
		t.Errorf("sign-in after the window: %v", err)
	}
}
