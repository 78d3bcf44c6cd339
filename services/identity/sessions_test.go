package identity_test

import (
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/services/identity"
)

func (e *env) refresh(t *testing.T, token string) (*identityv1.LoginResponse, error) {
	t.Helper()
	return e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_RefreshToken{RefreshToken: token}})
}

// Refresh tokens rotate: each works once, and presenting one again ends its
// whole session (the token it was exchanged for stops working too); other
// sessions of the same user are not touched; two refreshes racing with one
// token get at most one new token.
func TestRefreshTokensRotateWithReuseDetection(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "rita")
	first, err := e.login(t, "rita", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.login(t, "rita", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.refresh(t, first.GetRefreshToken())
	if err != nil || second.GetPrincipal() != "users/rita" || second.GetRefreshToken() == first.GetRefreshToken() {
		t.Fatalf("refresh = %v, %v", second, err)
	}
	_, err = e.refresh(t, first.GetRefreshToken())
	wantCode(t, "a refresh token used again", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	_, err = e.refresh(t, second.GetRefreshToken())
	wantCode(t, "the token of a session ended by reuse", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	if _, err := e.refresh(t, other.GetRefreshToken()); err != nil {
		t.Errorf("another session of the same user: %v", err)
	}
	// The ended session's access tokens end with it; the other session's
	// keeps working.
	e.sync(t)
	for what, tok := range map[string]string{"first": first.GetAccessToken(), "second": second.GetAccessToken()} {
		_, err := e.client(t, tok).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
		wantCode(t, "the "+what+" access token of a session ended by reuse", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	}
	if _, err := e.client(t, other.GetAccessToken()).GetCaller(t.Context(), &identityv1.GetCallerRequest{}); err != nil {
		t.Errorf("the access token of another session of the same user: %v", err)
	}

	race, err := e.login(t, "rita", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 4 {
		wg.Go(func() {
			if _, err := e.refresh(t, race.GetRefreshToken()); err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if won > 1 {
		t.Errorf("%d refreshes with one token succeeded", won)
	}
}

// An SSO user's session is checked again at refresh: a replica that no
// longer trusts the issuer refuses it, and ends it.
func TestSSORefreshRechecked(t *testing.T) {
	p, e := newSSOEnv(t, "runway")
	r, err := e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Oidc{
		Oidc: &identityv1.OidcCredentials{IdToken: p.IDToken(t, nil, jwt.MapClaims{"sub": "s-9", "email": "sso@example.com"})}}})
	if err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	next, err := e.refresh(t, r.GetRefreshToken())
	if err != nil {
		t.Fatalf("SSO refresh: %v", err)
	}
	noSSO, err := identity.New(identity.Config{}, identity.Deps{Client: e.etcd, Guard: e.guard, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	_, err = noSSO.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_RefreshToken{RefreshToken: next.GetRefreshToken()}})
	wantCode(t, "SSO refresh where SSO is no longer configured", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	_, err = e.refresh(t, next.GetRefreshToken())
	wantCode(t, "the ended SSO session", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
}

// The bootstrap administrator is created on the very first start only: a
// later start creates nothing, even once the administrator and its rule
// were deleted.
func TestBootstrapOnlyOnce(t *testing.T) {
	e := newEnv(t)
	if pw, err := e.svc.Bootstrap(t.Context()); err != nil || pw != "" {
		t.Fatalf("second Bootstrap = %q, %v", pw, err)
	}
	pw := e.user(t, "root2")
	e.grant(t, userKind, "users/root2", "roles/system-admin")
	r, err := e.login(t, "root2", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	root2 := e.client(t, r.GetAccessToken())
	if _, err := root2.DeleteAccessRule(t.Context(), &identityv1.DeleteAccessRuleRequest{Name: "accessRules/bootstrap-admin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := root2.DeleteUser(t.Context(), &identityv1.DeleteUserRequest{Name: identity.BootstrapAdmin}); err != nil {
		t.Fatal(err)
	}
	if pw, err := e.svc.Bootstrap(t.Context()); err != nil || pw != "" {
		t.Fatalf("Bootstrap after the administrator was deleted = %q, %v", pw, err)
	}
	_, err = root2.GetUser(t.Context(), &identityv1.GetUserRequest{Name: identity.BootstrapAdmin})
	wantCode(t, "the deleted bootstrap administrator", err, codes.NotFound, "USER_NOT_FOUND")
	_, err = root2.GetAccessRule(t.Context(), &identityv1.GetAccessRuleRequest{Name: "accessRules/bootstrap-admin"})
	wantCode(t, "the deleted bootstrap rule", err, codes.NotFound, "ACCESS_RULE_NOT_FOUND")
}

// Logout ends the caller's sign-in: its access and refresh tokens stop
// working, another sign-in of the same user does not; a token of no
// sign-in cannot be signed out.
func TestLogoutEndsTheSignIn(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "lou")
	gone, err := e.login(t, "lou", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	kept, err := e.login(t, "lou", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client(t, gone.GetAccessToken()).Logout(t.Context(), &identityv1.LogoutRequest{}); err != nil {
		t.Fatalf("Logout: %v", err)
	}
	e.sync(t)
	_, err = e.client(t, gone.GetAccessToken()).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
	wantCode(t, "the access token of a signed-out sign-in", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	_, err = e.refresh(t, gone.GetRefreshToken())
	wantCode(t, "the refresh token of a signed-out sign-in", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	if _, err := e.client(t, kept.GetAccessToken()).GetCaller(t.Context(), &identityv1.GetCallerRequest{}); err != nil {
		t.Errorf("another sign-in of the same user: %v", err)
	}
	_, err = e.admin.Logout(t.Context(), &identityv1.LogoutRequest{}) // the fixture's token of no sign-in
	wantCode(t, "Logout with a token of no sign-in", err, codes.FailedPrecondition, "NO_SESSION")
}
