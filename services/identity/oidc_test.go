package identity_test

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/services/identity"
	"github.com/runwayhq/runway/services/identity/oidctest"
)

// newSSOEnv is a provider and an identity service that trusts it, with
// Runway's client id there.
func newSSOEnv(t *testing.T, clientID string) (*oidctest.Provider, *env) {
	t.Helper()
	p := oidctest.New(t)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	return p, newEnv(t, func(o *options) {
		o.auth.OIDC = &identity.OIDCConfig{Issuer: p.URL, ClientID: clientID, HTTPClient: &http.Client{Transport: transport}}
	})
}

// A PKCE verifier and its S256 challenge (RFC 7636 appendix B), and the web
// UI's redirect URI.
const (
	verifier  = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
	redirect  = "http://127.0.0.1:7070/sso/callback"
)

// codeLogin signs in with an authorization code, as the web UI does.
func codeLogin(t *testing.T, e *env, code, verifier, redirect string) (*identityv1.LoginResponse, error) {
	return e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_OidcCode{
		OidcCode: &identityv1.OidcAuthorizationCode{Code: code, CodeVerifier: verifier, RedirectUri: redirect}}})
}

// SSO users sign in with the provider's ID token (discovery, JWKS and
// signature checked); their groups come from the token's claims and group
// access rules apply to them.
func TestOIDCSignIn(t *testing.T) {
	p, e := newSSOEnv(t, "runway")
	login := func(tok string) (*identityv1.LoginResponse, error) {
		return e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{
			Credentials: &identityv1.LoginRequest_Oidc{Oidc: &identityv1.OidcCredentials{IdToken: tok}}})
	}
	e.grant(t, identityv1.SubjectKind_SUBJECT_KIND_GROUP, "ml-team", "roles/viewer")

	r, err := login(p.IDToken(t, nil, jwt.MapClaims{"email": "Sam@Example.com", "groups": []string{"ml-team", "other"}}))
	if err != nil || !strings.HasPrefix(r.GetPrincipal(), "users/sam-example-com-") {
		t.Fatalf("Login with an ID token = %v, %v", r, err)
	}
	e.sync(t)
	c, err := e.client(t, r.GetAccessToken()).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
	if err != nil || len(c.GetAccessRules()) != 1 || c.GetAccessRules()[0].GetSubject().GetName() != "ml-team" {
		t.Fatalf("GetCaller of the SSO user = %v, %v", c, err)
	}
	u, err := e.admin.GetUser(t.Context(), &identityv1.GetUserRequest{Name: r.GetPrincipal()})
	if err != nil || u.GetIdentityProvider() != p.URL || u.GetEmail() != "sam@example.com" || len(u.GetGroups()) != 2 {
		t.Fatalf("the SSO user = %v, %v", u, err)
	}
	// The next sign-in takes the groups of the new token.
	if _, err := login(p.IDToken(t, nil, jwt.MapClaims{"email": "sam@example.com", "groups": []string{"other"}})); err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	c, err = e.client(t, r.GetAccessToken()).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
	if err != nil || len(c.GetAccessRules()) != 0 {
		t.Fatalf("GetCaller after leaving ml-team = %v, %v", c, err)
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for what, tok := range map[string]string{
		"another key":        p.IDToken(t, other, jwt.MapClaims{"email": "sam@example.com"}),
		"another audience":   p.IDToken(t, nil, jwt.MapClaims{"email": "sam@example.com", "aud": "someone-else"}),
		"expired":            p.IDToken(t, nil, jwt.MapClaims{"email": "sam@example.com", "exp": time.Now().Add(-time.Hour).Unix()}),
		"another issuer":     p.IDToken(t, nil, jwt.MapClaims{"email": "sam@example.com", "iss": "https://evil.example.com"}),
		"no subject":         p.IDToken(t, nil, jwt.MapClaims{"sub": ""}),
		"not a token at all": "garbage",
	} {
		_, err := login(tok)
		wantCode(t, "an ID token with "+what, err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	}
}

// SSO users are (issuer, sub): two users whose emails slug alike stay two
// users, one user keeps its identity when its email changes, and an email
// links to an existing user only when it is verified and the deployment
// allows linking.
func TestSSOIdentityIsIssuerAndSubject(t *testing.T) {
	p := oidctest.New(t)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	for _, link := range []bool{false, true} {
		e := newEnv(t, func(o *options) {
			o.auth.OIDC = &identity.OIDCConfig{Issuer: p.URL, ClientID: "runway", LinkVerifiedEmail: link,
				HTTPClient: &http.Client{Transport: transport}}
		})
		login := func(claims jwt.MapClaims) string {
			t.Helper()
			r, err := e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{
				Credentials: &identityv1.LoginRequest_Oidc{Oidc: &identityv1.OidcCredentials{IdToken: p.IDToken(t, nil, claims)}}})
			if err != nil {
				t.Fatalf("SSO Login %v: %v", claims, err)
			}
			return r.GetPrincipal()
		}
		dot := login(jwt.MapClaims{"sub": "s-1", "email": "a.b@example.com", "email_verified": true})
		dash := login(jwt.MapClaims{"sub": "s-2", "email": "a-b@example.com", "email_verified": true})
		if dot == dash || !strings.HasPrefix(dot, "users/a-b-example-com-") || !strings.HasPrefix(dash, "users/a-b-example-com-") {
			t.Errorf("emails that slug alike: %s and %s, want two users", dot, dash)
		}
		if again := login(jwt.MapClaims{"sub": "s-1", "email": "renamed@example.com"}); again != dot {
			t.Errorf("the same subject with a new email: %s, want %s", again, dot)
		}

		e.user(t, "lee")
		unverified := login(jwt.MapClaims{"sub": "s-3", "email": "lee@example.com", "email_verified": false})
		if unverified == "users/lee" {
			t.Errorf("linking %v: an unverified email became the local user", link)
		}
		lee, err := e.admin.GetUser(t.Context(), &identityv1.GetUserRequest{Name: "users/lee"})
		if err != nil || lee.GetIdentityProvider() != "" {
			t.Fatalf("the local user after an unverified SSO sign-in with its email: %v, %v", lee, err)
		}
		verified := login(jwt.MapClaims{"sub": "s-4", "email": "lee@example.com", "email_verified": true})
		if got := verified == "users/lee"; got != link {
			t.Errorf("linking %v: a verified email signed in as %s", link, verified)
		}
		if link {
			if again := login(jwt.MapClaims{"sub": "s-4"}); again != "users/lee" {
				t.Errorf("the linked subject without an email: %s, want users/lee", again)
			}
		}
	}
}

// A sign-in page learns, with no token, where single sign-on is; and that
// there is none when it is not configured.
func TestGetSignInOptions(t *testing.T) {
	p := oidctest.New(t)
	e := newEnv(t, func(o *options) { o.auth.OIDC = &identity.OIDCConfig{Issuer: p.URL, ClientID: "runway-ui"} })
	got, err := e.client(t, "").GetSignInOptions(t.Context(), &identityv1.GetSignInOptionsRequest{})
	if err != nil || got.GetSingleSignOn().GetIssuer() != p.URL || got.GetSingleSignOn().GetClientId() != "runway-ui" {
		t.Fatalf("GetSignInOptions without a token = %v, %v", got, err)
	}
	off := newEnv(t, func(*options) {})
	got, err = off.client(t, "").GetSignInOptions(t.Context(), &identityv1.GetSignInOptionsRequest{})
	if err != nil || got.GetSingleSignOn() != nil {
		t.Fatalf("GetSignInOptions with no provider = %v, %v", got, err)
	}
}

// A public client (the web UI) signs in with an authorization code and its
// PKCE verifier: the server redeems the code at the provider once, and a
// code with another verifier or redirect URI, or used twice, is refused.
func TestOIDCAuthorizationCodeSignIn(t *testing.T) {
	p, e := newSSOEnv(t, "runway-ui")
	opts, err := e.client(t, "").GetSignInOptions(t.Context(), &identityv1.GetSignInOptionsRequest{})
	if err != nil || opts.GetSingleSignOn().GetAuthorizationEndpoint() != p.URL+"/auth" {
		t.Fatalf("GetSignInOptions = %v, %v; want the provider's authorization endpoint", opts, err)
	}
	who := jwt.MapClaims{"sub": "sam-1", "email": "sam@example.com"}
	login := func(code, verifier, redirect string) (*identityv1.LoginResponse, error) {
		return codeLogin(t, e, code, verifier, redirect)
	}
	code := p.AuthorizationCode("runway-ui", redirect, challenge, who)
	r, err := login(code, verifier, redirect)
	if err != nil || !strings.HasPrefix(r.GetPrincipal(), "users/sam-example-com-") || r.GetAccessToken() == "" {
		t.Fatalf("Login with an authorization code = %v, %v", r, err)
	}
	_, err = login(code, verifier, redirect)
	wantCode(t, "the same code again", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	other := strings.Repeat("x", 43)
	_, err = login(p.AuthorizationCode("runway-ui", redirect, challenge, who), other, redirect)
	wantCode(t, "another verifier", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	_, err = login(p.AuthorizationCode("runway-ui", redirect, challenge, who), verifier, "http://127.0.0.1:7070/elsewhere")
	wantCode(t, "another redirect URI", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	_, err = login(p.AuthorizationCode("someone-else", redirect, challenge, who), verifier, redirect)
	wantCode(t, "a code of another client", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	for what, c := range map[string][3]string{
		"no code":           {"", verifier, redirect},
		"a huge code":       {strings.Repeat("c", 5000), verifier, redirect},
		"a short verifier":  {"c", "short", redirect},
		"a verifier with /": {"c", strings.Repeat("a/", 22), redirect},
		"a javascript URI":  {"c", verifier, "javascript:alert(1)"},
		"no redirect URI":   {"c", verifier, ""},
	} {
		_, err := login(c[0], c[1], c[2])
		wantCode(t, what, err, codes.InvalidArgument, "")
	}
}

// Code redemptions are requests to the provider for callers with no token:
// at most identity.MaxCodeRedemptions wait on a slow provider at once, and
// the next is refused at once, until one is done.
func TestOIDCCodeRedemptionsAreBounded(t *testing.T) {
	p, e := newSSOEnv(t, "runway-ui")
	// A user each: concurrent sign-ins of one SSO user are not what this is about.
	login := func(who int) error {
		code := p.AuthorizationCode("runway-ui", redirect, challenge, jwt.MapClaims{"sub": fmt.Sprint("sam-", who), "email": fmt.Sprintf("sam%d@example.com", who)})
		_, err := codeLogin(t, e, code, verifier, redirect)
		return err
	}
	if err := login(0); err != nil { // discovery done
		t.Fatal(err)
	}
	release := p.Stall()
	defer release()
	errs := make(chan error, identity.MaxCodeRedemptions)
	for i := range identity.MaxCodeRedemptions {
		go func() { errs <- login(1 + i) }()
	}
	for deadline := time.Now().Add(10 * time.Second); p.Stalled() < identity.MaxCodeRedemptions; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d redemptions reached the provider", p.Stalled(), identity.MaxCodeRedemptions)
		}
	}
	// Every slot taken: the next is refused without waiting for the provider.
	err := login(100)
	wantCode(t, "a redemption beyond the bound", err, codes.ResourceExhausted, "TOO_MANY_SIGN_IN_ATTEMPTS")
	release()
	for range identity.MaxCodeRedemptions {
		if err := <-errs; err != nil {
			t.Fatalf("a waiting redemption, once the provider answered: %v", err)
		}
	}
	if err := login(101); err != nil {
		t.Fatalf("after the provider answered: %v", err)
	}
}

// Many sign-ins of one SSO user at once (the UI in several tabs, a CLI)
// all succeed and leave one user: their writes of the same record conflict,
// and a conflict with a sign-in that wrote the same is no failure.
func TestConcurrentSSOSignIns(t *testing.T) {
	p, e := newSSOEnv(t, "runway")
	claims := jwt.MapClaims{"email": "kim@example.com", "groups": []string{"ml-team"}}
	first, err := e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_Oidc{Oidc: &identityv1.OidcCredentials{IdToken: p.IDToken(t, nil, claims)}}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	toks := make([]string, n)
	for i := range toks {
		toks[i] = p.IDToken(t, nil, claims)
	}
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for _, tok := range toks {
		wg.Go(func() {
			r, err := e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{
				Credentials: &identityv1.LoginRequest_Oidc{Oidc: &identityv1.OidcCredentials{IdToken: tok}}})
			if err == nil && r.GetPrincipal() != first.GetPrincipal() {
				err = fmt.Errorf("signed in as %s, want %s", r.GetPrincipal(), first.GetPrincipal())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a concurrent sign-in: %v", err)
		}
	}
	l, err := e.admin.ListUsers(t.Context(), &identityv1.ListUsersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var sso int
	for _, u := range l.GetUsers() {
		if u.GetIdentityProvider() == p.URL {
			sso++
		}
	}
	if sso != 1 {
		t.Errorf("%d SSO users after one user's sign-ins, want 1", sso)
	}
}
