// Package oidctest is a small OpenID Connect provider for tests: discovery,
// a JWKS with one RSA key, ID tokens signed with it, and the OAuth device
// authorization grant (RFC 8628) that `runway login --sso` uses.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
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
}

// New starts a provider until the test ends.
func New(t testing.TB) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Key: key}
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

// token answers the device-code grant: authorization_pending until
// Approve, then an access token and an ID token.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
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
