package identity_test

import (
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/services/identity"
)

// Failures count against the user a name resolves to: wrong passwords
// under its id and its email alike lock it out, under either name; an
// unknown name is throttled like a known one.
func TestLockoutByResolvedUser(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "ivy")
	for i := range 5 {
		who := "ivy"
		if i%2 == 1 {
			who = "IVY@example.com"
		}
		_, err := e.login(t, who, "wrong password", "")
		wantCode(t, fmt.Sprintf("wrong password %d as %s", i+1, who), err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	}
	for _, who := range []string{"ivy", "ivy@example.com", "users/ivy"} {
		_, err := e.login(t, who, pw, "")
		wantCode(t, "the right password as "+who+" after 5 failures under two names", err, codes.ResourceExhausted, "TOO_MANY_SIGN_IN_ATTEMPTS")
	}
	for i := range 5 {
		_, err := e.login(t, "nobody@example.com", "wrong password", "")
		wantCode(t, fmt.Sprintf("unknown name %d", i+1), err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	}
	_, err := e.login(t, "nobody@example.com", "wrong password", "")
	wantCode(t, "an unknown name after 5 failures", err, codes.ResourceExhausted, "TOO_MANY_SIGN_IN_ATTEMPTS")
}

// One address that tries many names is refused after its own limit, even
// though no name reached its own.
func TestSourceThrottle(t *testing.T) {
	e := newEnv(t, func(o *options) { o.auth.MaxSourceFailures = 4 })
	pw := e.user(t, "ivy")
	for i := range 4 {
		_, err := e.login(t, fmt.Sprintf("guess-%d", i), "wrong password", "")
		wantCode(t, fmt.Sprintf("guess %d", i), err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	}
	_, err := e.login(t, "ivy", pw, "")
	wantCode(t, "a sign-in from the address after 4 failures", err, codes.ResourceExhausted, "TOO_MANY_SIGN_IN_ATTEMPTS")
	// In-process (no address) the user itself is not locked.
	if _, err := e.svc.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
		Password: &identityv1.PasswordCredentials{User: "ivy", Password: pw}}}); err != nil {
		t.Errorf("ivy's own sign-in, not from that address: %v", err)
	}
}

// A user holds at most MaxSessions live sessions: the next sign-in ends the
// oldest, whose refresh token then fails; the newest work.
func TestSessionCap(t *testing.T) {
	e := newEnv(t, func(o *options) { o.auth.MaxSessions = 3 })
	pw := e.user(t, "ivy") // one session
	var refresh []string
	for range 4 {
		r, err := e.login(t, "ivy", pw, "")
		if err != nil {
			t.Fatal(err)
		}
		refresh = append(refresh, r.GetRefreshToken())
	}
	resp, err := e.etcd.Get(t.Context(), etcdstore.PrefixUserSessions, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 3 {
		t.Errorf("%d sessions indexed, want 3", resp.Count)
	}
	_, err = e.refresh(t, refresh[0])
	wantCode(t, "the refresh token of a session ended by the cap", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	for i, tok := range refresh[1:] {
		if _, err := e.refresh(t, tok); err != nil {
			t.Errorf("refresh of live session %d: %v", i+1, err)
		}
	}
}

// A store from before the sign-in indexes gets them at the next start: a
// user whose index key is missing signs in by email after Bootstrap.
func TestIndexBackfill(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "ivy")
	if _, err := e.etcd.Delete(t.Context(), etcdstore.PrefixUserEmails, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	_, err := e.login(t, "ivy@example.com", pw, "")
	wantCode(t, "sign-in by email without its index", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	restarted, err := identity.New(identity.Config{BcryptCost: 4}, identity.Deps{Client: e.etcd, Guard: e.guard})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Bootstrap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.login(t, "ivy@example.com", pw, ""); err != nil {
		t.Errorf("sign-in by email after the backfill: %v", err)
	}
	// A deleted user takes its index keys with it.
	if _, err := e.admin.DeleteUser(t.Context(), &identityv1.DeleteUserRequest{Name: "users/ivy"}); err != nil {
		t.Fatal(err)
	}
	resp, err := e.etcd.Get(t.Context(), etcdstore.PrefixUserEmails, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 1 { // the administrator's
		t.Errorf("%d email index keys after deleting ivy, want 1", resp.Count)
	}
}
