package identity_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/services/identity"
)

// provider is a small OpenID provider: a discovery document, a JWKS with one
// RSA key, and ID tokens signed with it.
type provider struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newProvider(t *testing.T) *provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": p.srv.URL, "jwks_uri": p.srv.URL + "/jwks",
			"authorization_endpoint": p.srv.URL + "/auth", "token_endpoint": p.srv.URL + "/token",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1", "alg": "RS256",
			"use": "sig", "n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// idToken signs claims (iss, aud, exp and iat filled in unless given) with
// key (the provider's when nil).
func (p *provider) idToken(t *testing.T, key *rsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	base := jwt.MapClaims{"iss": p.srv.URL, "aud": "runway", "sub": "12345",
		"iat": time.Now().Unix(), "exp": time.Now().Add(5 * time.Minute).Unix()}
	for k, v := range claims {
		base[k] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, base)
	tok.Header["kid"] = "k1"
	if key == nil {
		key = p.key
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// SSO users sign in with the provider's ID token (discovery, JWKS and
// signature checked); their groups come from the token's claims and group
// access rules apply to them.
func TestOIDCSignIn(t *testing.T) {
	p := newProvider(t)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	e := newEnv(t, func(o *options) {
		o.auth.OIDC = &identity.OIDCConfig{Issuer: p.srv.URL, ClientID: "runway", HTTPClient: &http.Client{Transport: transport}}
	})
	login := func(tok string) (*identityv1.LoginResponse, error) {
		return e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{
			Credentials: &identityv1.LoginRequest_Oidc{Oidc: &identityv1.OidcCredentials{IdToken: tok}}})
	}
	e.grant(t, identityv1.SubjectKind_SUBJECT_KIND_GROUP, "ml-team", "roles/viewer")

	r, err := login(p.idToken(t, nil, jwt.MapClaims{"email": "Sam@Example.com", "groups": []string{"ml-team", "other"}}))
	if err != nil || r.GetPrincipal() != "users/sam-example-com" {
		t.Fatalf("Login with an ID token = %v, %v", r, err)
	}
	e.sync(t)
	c, err := e.client(t, r.GetAccessToken()).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
	if err != nil || len(c.GetAccessRules()) != 1 || c.GetAccessRules()[0].GetSubject().GetName() != "ml-team" {
		t.Fatalf("GetCaller of the SSO user = %v, %v", c, err)
	}
	u, err := e.admin.GetUser(t.Context(), &identityv1.GetUserRequest{Name: "users/sam-example-com"})
	if err != nil || u.GetIdentityProvider() != p.srv.URL || u.GetEmail() != "sam@example.com" || len(u.GetGroups()) != 2 {
		t.Fatalf("the SSO user = %v, %v", u, err)
	}
	// The next sign-in takes the groups of the new token.
	if _, err := login(p.idToken(t, nil, jwt.MapClaims{"email": "sam@example.com", "groups": []string{"other"}})); err != nil {
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
		"another key":        p.idToken(t, other, jwt.MapClaims{"email": "sam@example.com"}),
		"another audience":   p.idToken(t, nil, jwt.MapClaims{"email": "sam@example.com", "aud": "someone-else"}),
		"expired":            p.idToken(t, nil, jwt.MapClaims{"email": "sam@example.com", "exp": time.Now().Add(-time.Hour).Unix()}),
		"another issuer":     p.idToken(t, nil, jwt.MapClaims{"email": "sam@example.com", "iss": "https://evil.example.com"}),
		"no email":           p.idToken(t, nil, jwt.MapClaims{}),
		"not a token at all": "garbage",
	} {
		_, err := login(tok)
		wantCode(t, "an ID token with "+what, err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	}
	// A local user is not taken over by an SSO sign-in with the same id.
	e.user(t, "lee-example-com")
	_, err = login(p.idToken(t, nil, jwt.MapClaims{"email": "lee@example.com"}))
	wantCode(t, "SSO sign-in onto a local user", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
}
