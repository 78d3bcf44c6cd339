// Package oidctest is a small OpenID Connect provider for tests: discovery,
// a JWKS with one RSA key, ID tokens signed with it, and the OAuth device
// authorization grant (RFC 8628) that `runway login --sso` uses, and the
// authorization code grant with PKCE (RFC 7636) that the web UI uses.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// deviceCode is the one device code the provider hands out.
const deviceCode = "device-code-1"

// UserCode is the code a person would type at the verification page.
const UserCode = "WDJB-MJHT"

// Provider is a running provider; its issuer is URL.
type Provider struct {
	URL string
	Key *rsa.PrivateKey

	srv *httptest.Server

	mu       sync.Mutex
	approved jwt.MapClaims // the signed-in person's claims once approved
	polls    int           // token polls for the device code
	codes    map[string]codeGrant
	stall    chan struct{} // while set, the code grant waits for it to close
	stalled  int           // code grants waiting on stall
}

// codeGrant is an authorization code not yet redeemed.
type codeGrant struct {
	clientID, redirectURI, challenge string
	claims                           jwt.MapClaims
}

// New starts a provider until the test ends.
func New(t testing.TB) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Key: key, codes: map[string]codeGrant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": p.URL, "jwks_uri": p.URL + "/jwks",
			"authorization_endpoint": p.URL + "/auth", "token_endpoint": p.URL + "/token",
			"device_authorization_endpoint":         p.URL + "/device",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1", "alg": "RS256",
			"use": "sig", "n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes())}}})
	})
	mux.HandleFunc("POST /device", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"device_code": deviceCode, "user_code": UserCode,
			"verification_uri": p.URL + "/activate", "expires_in": 300, "interval": 1})
	})
	mux.HandleFunc("POST /token", p.token)
	// The sign-in page, for a person already approved (Approve): straight
	// back to the redirect URI with a code.
	mux.HandleFunc("GET /auth", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		p.mu.Lock()
		claims := p.approved
		p.mu.Unlock()
		if q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || claims == nil {
			http.Error(w, "invalid_request", http.StatusBadRequest)
			return
		}
		code := p.AuthorizationCode(q.Get("client_id"), q.Get("redirect_uri"), q.Get("code_challenge"), claims)
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+q.Get("state"), http.StatusFound)
	})
	p.srv = httptest.NewServer(mux)
	p.URL = p.srv.URL
	t.Cleanup(p.srv.Close)
	return p
}

// Approve signs the device code in as the person with claims (and aud
// clientID), as if they had entered UserCode at the verification page.
func (p *Provider) Approve(clientID string, claims jwt.MapClaims) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := jwt.MapClaims{"aud": clientID}
	for k, v := range claims {
		c[k] = v
	}
	p.approved = c
}

// Polls is how many times the device code was polled for a token.
func (p *Provider) Polls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls
}

// AuthorizationCode mints a code for clientID and redirectURI, as if the
// person with claims had signed in at the authorization endpoint; it
// redeems once, with the verifier whose S256 challenge is challenge.
func (p *Provider) AuthorizationCode(clientID, redirectURI, challenge string, claims jwt.MapClaims) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	code := base64.RawURLEncoding.EncodeToString(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.codes[code] = codeGrant{clientID: clientID, redirectURI: redirectURI, challenge: challenge, claims: claims}
	return code
}

// Stall makes the code grant wait, as a slow provider would, until the
// returned func is called.
func (p *Provider) Stall() (release func()) {
	ch := make(chan struct{})
	p.mu.Lock()
	p.stall = ch
	p.mu.Unlock()
	return sync.OnceFunc(func() {
		p.mu.Lock()
		p.stall = nil
		p.mu.Unlock()
		close(ch)
	})
}

// Stalled is how many code grants are waiting for Stall's release.
func (p *Provider) Stalled() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled
}

// redeem answers the authorization code grant: the code once, for its
// client and redirect URI, with the PKCE verifier of its challenge.
func (p *Provider) redeem(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	stall := p.stall
	if stall != nil {
		p.stalled++
	}
	p.mu.Unlock()
	if stall != nil {
		<-stall
		p.mu.Lock()
		p.stalled--
		p.mu.Unlock()
	}
	p.mu.Lock()
	g, ok := p.codes[r.FormValue("code")]
	delete(p.codes, r.FormValue("code"))
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.FormValue("code_verifier")))
	if !ok || g.clientID != r.FormValue("client_id") || g.redirectURI != r.FormValue("redirect_uri") ||
		base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
		return
	}
	c := jwt.MapClaims{"aud": g.clientID}
	for k, v := range g.claims {
		c[k] = v
	}
	id, err := p.sign(nil, c)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "opaque", "token_type": "Bearer", "expires_in": 300, "id_token": id})
}

// token answers the device-code grant (authorization_pending until
// Approve, then an access token and an ID token) and the authorization
// code grant.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.FormValue("grant_type") == "authorization_code" {
		p.redeem(w, r)
		return
	}
	if r.FormValue("grant_type") != "urn:ietf:params:oauth:grant-type:device_code" || r.FormValue("device_code") != deviceCode {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant"})
		return
	}
	p.mu.Lock()
	p.polls++
	claims := p.approved
	p.mu.Unlock()
	if claims == nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "authorization_pending"})
		return
	}
	id, err := p.sign(nil, claims)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "opaque", "token_type": "Bearer", "expires_in": 300, "id_token": id})
}

// IDToken signs claims (iss, aud "runway", sub, exp and iat filled in unless
// given) with key (the provider's when nil).
func (p *Provider) IDToken(t testing.TB, key *rsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	s, err := p.sign(key, claims)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (p *Provider) sign(key *rsa.PrivateKey, claims jwt.MapClaims) (string, error) {
	base := jwt.MapClaims{"iss": p.URL, "aud": "runway", "sub": "12345",
		"iat": time.Now().Unix(), "exp": time.Now().Add(5 * time.Minute).Unix()}
	for k, v := range claims {
		base[k] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, base)
	tok.Header["kid"] = "k1"
	if key == nil {
		key = p.Key
	}
	return tok.SignedString(key)
}
