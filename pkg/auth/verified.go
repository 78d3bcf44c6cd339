package auth

import (
	"crypto/subtle"
	"sync"
	"time"
)

// maxVerified bounds the verified-token cache. Only tokens this deployment
// signed get in (a forged one fails its signature first), so a caller
// cannot fill it with garbage; at the bound the expired entries go, and
// if none has expired, all of them.
const maxVerified = 4096

// verifiedTokens remembers the tokens whose signature and JSON were
// checked, so that a caller who sends the same token on every call (the
// CLI, the SDK, a service) pays for the signature check and the decoding once. Only
// that work is saved: on every call the key must still verify (not
// retired, the same key), the token must not have expired, and parse
// still checks its type and that its principal holds the credentials it
// was issued for (current), so a revoked token is refused as before.
type verifiedTokens struct {
	mu sync.Mutex
	m  map[string]verifiedToken
}

type verifiedToken struct {
	c      claims
	kid    string
	secret []byte
}

// get returns the token's claims if it was verified and is still valid at
// now with the key verifier gives for its id.
func (v *verifiedTokens) get(token string, now time.Time, verifier func(kid string) (verifyKey, bool)) (*claims, bool) {
	v.mu.Lock()
	e, ok := v.m[token]
	v.mu.Unlock()
	if !ok {
		return nil, false
	}
	key, ok := verifier(e.kid)
	if !ok || subtle.ConstantTimeCompare(key.raw, e.secret) != 1 || !validAt(&e.c, now) {
		return nil, false
	}
	c := e.c
	return &c, true
}

// validAt is the time rule jwt applies (ExpiresAt required): now before
// the expiry and not before NotBefore.
func validAt(c *claims, now time.Time) bool {
	if c.ExpiresAt == nil || !now.Before(c.ExpiresAt.Time) {
		return false
	}
	return c.NotBefore == nil || !now.Before(c.NotBefore.Time)
}

func (v *verifiedTokens) put(token string, c *claims, kid string, secret []byte, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[string]verifiedToken{}
	}
	if len(v.m) >= maxVerified {
		for t, e := range v.m {
			if !validAt(&e.c, now) {
				delete(v.m, t)
			}
		}
		if len(v.m) >= maxVerified {
			clear(v.m)
		}
	}
	v.m[token] = verifiedToken{c: *c, kid: kid, secret: secret}
}
