package identity_test

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/services/identity"
	"github.com/runwayhq/runway/services/identity/oidctest"
)

// SSO users sign in with the provider's ID token (discovery, JWKS and
// signature checked); their groups come from the token's claims and group
// access rules apply to them.
func TestOIDCSignIn(t *testing.T) {
	p := oidctest.New(t)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	e := newEnv(t, func(o *options) {
		o.auth.OIDC = &identity.OIDCConfig{Issuer: p.URL, ClientID: "runway", HTTPClient: &http.Client{Transport: transport}}
	})
	login := func(tok string) (*identityv1.LoginResponse, error) {
		return e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{
			Credentials: &identityv1.LoginRequest_Oidc{Oidc: &identityv1.OidcCredentials{IdToken: tok}}})
	}
	e.grant(t, identityv1.SubjectKind_SUBJECT_KIND_GROUP, "ml-team", "roles/viewer")

	r, err := login(p.IDToken(t, nil, jwt.MapClaims{"email": "Sam@Example.com", "groups": []string{"ml-team", "other"}}))
	if err != nil || r.GetPrincipal() != "users/sam-example-com" {
		t.Fatalf("Login with an ID token = %v, %v", r, err)
	}
	e.sync(t)
	c, err := e.client(t, r.GetAccessToken()).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
	if err != nil || len(c.GetAccessRules()) != 1 || c.GetAccessRules()[0].GetSubject().GetName() != "ml-team" {
		t.Fatalf("GetCaller of the SSO user = %v, %v", c, err)
	}
	u, err := e.admin.GetUser(t.Context(), &identityv1.GetUserRequest{Name: "users/sam-example-com"})
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
		"no email":           p.IDToken(t, nil, jwt.MapClaims{}),
		"not a token at all": "garbage",
	} {
		_, err := login(tok)
		wantCode(t, "an ID token with "+what, err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	}
	// A local user is not taken over by an SSO sign-in with the same id.
	e.user(t, "lee-example-com")
	_, err = login(p.IDToken(t, nil, jwt.MapClaims{"email": "lee@example.com"}))
	wantCode(t, "SSO sign-in onto a local user", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
}
