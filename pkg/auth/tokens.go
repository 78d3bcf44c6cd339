package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/credentials"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// TokenType tells what a token may be used for.
type TokenType string

// The token types.
const (
	AccessToken  TokenType = "access"  // calls the API
	RefreshToken TokenType = "refresh" // only exchanged by Login for an access token
	ServiceToken TokenType = "service" // a control-plane service calling another
)

// claims are a token's contents. Gen and UID tie a user's or application's
// token to its current credentials: resetting a password, regenerating a
// secret or deleting (and re-creating) the principal invalidates it.
type claims struct {
	jwt.RegisteredClaims
	Type TokenType `json:"typ"`
	UID  string    `json:"uid,omitempty"`
	Gen  int64     `json:"gen,omitempty"`
	// Sid and Seq place a refresh token in its session (its family) and
	// its turn there; an access token of a session works only while the
	// session lasts. Srev is the etcd revision that started the session:
	// a mirror at or past it that lacks the session knows it ended.
	Sid  string `json:"sid,omitempty"`
	Seq  int64  `json:"seq,omitempty"`
	Srev int64  `json:"srev,omitempty"`
	// Res and Tool bind a tool ticket or session to one workload (and a
	// ticket to one of its tools): no other is reached with it (tools.go).
	Res  string `json:"res,omitempty"`
	Tool string `json:"tool,omitempty"`
}

// Subject is who a token is issued to.
type Subject struct {
	Principal string // users/{user}, applications/{application} or services/{service}
	UID       string // the user's or application's uid
	Gen       int64  // its credential generation
	Session   string // the sign-in's session (services/identity)
	Sequence  int64  // a refresh token's place in the session
	// SessionRevision is the etcd revision that stored the session.
	SessionRevision int64
}

// errInvalidToken is every reason a token is refused; callers get one
// CREDENTIALS_INVALID whatever it was.
var errInvalidToken = errors.New("invalid token")

// Issue signs a token of type typ for s, valid for ttl (at most the
// configured longest lifetime).
func (g *Guard) Issue(s Subject, typ TokenType, ttl time.Duration) (string, time.Time, error) {
	return g.issue(s, typ, ttl, claims{})
}

// issue signs a token with the bindings (Res, Tool, ID) of bound.
func (g *Guard) issue(s Subject, typ TokenType, ttl time.Duration, bound claims) (string, time.Time, error) {
	if ttl > g.cfg.MaxTokenTTL {
		ttl = g.cfg.MaxTokenTTL
	}
	key, ok := g.keys.signer()
	if !ok {
		return "", time.Time{}, errors.New("no signing key")
	}
	now := g.now()
	exp := now.Add(ttl)
	method, signWith := signingKey(key)
	t := jwt.NewWithClaims(method, claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: issuer, Subject: s.Principal, ID: bound.ID,
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp)},
		Type: typ, UID: s.UID, Gen: s.Gen, Sid: s.Session, Seq: s.Sequence, Srev: s.SessionRevision,
		Res: bound.Res, Tool: bound.Tool})
	t.Header["kid"] = key.GetId()
	signed, err := t.SignedString(signWith)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign a token: %w", err)
	}
	return signed, exp, nil
}

const issuer = "runway"

// parse checks the signature (a known, unretired key), the expiry and the
// type, and that the principal still holds the credentials the token was
// issued for. The signature and decoding of a token seen before come from
// g.verified, which checks its key and expiry again (verified.go).
func (g *Guard) parse(ctx context.Context, token string, want ...TokenType) (*claims, error) {
	c, err := verifySignature(token, g.now(), g.keys.verifier, &g.verified)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(want, c.Type) && !(slices.Contains(want, AccessToken) && c.Type == ServiceToken) {
		return nil, errInvalidToken
	}
	if !g.current(ctx, c) {
		return nil, errInvalidToken
	}
	return c, nil
}

// verifySignature decodes token and checks its signature with the key its
// kid names (a known, unretired one, of the method that key signs with),
// its issuer and its expiry at now. A token seen before comes from seen.
func verifySignature(token string, now time.Time, keys func(kid string) (verifyKey, bool), seen *verifiedTokens) (*claims, error) {
	if c, ok := seen.get(token, now, keys); ok {
		return c, nil
	}
	c := &claims{}
	var kid string
	var key verifyKey
	_, err := jwt.ParseWithClaims(token, c, func(t *jwt.Token) (any, error) {
		kid, _ = t.Header["kid"].(string)
		var ok bool
		// The method is the key's, never the token's to choose.
		if key, ok = keys(kid); !ok || t.Method.Alg() != key.method.Alg() {
			return nil, errInvalidToken
		}
		return key.key, nil
	}, jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg(), jwt.SigningMethodHS256.Alg()}), jwt.WithIssuer(issuer),
		jwt.WithExpirationRequired(), jwt.WithTimeFunc(func() time.Time { return now }))
	if err != nil {
		return nil, errInvalidToken
	}
	seen.put(token, c, kid, key.raw, now)
	return c, nil
}

// current reports whether the token's principal still exists with the
// same uid and credential generation. A session's token is judged on the
// user as of the revision that started the session (Srev), which is after
// any password change its login made.
func (g *Guard) current(ctx context.Context, c *claims) bool {
	kind, id, _ := strings.Cut(c.Subject, "/")
	switch kind {
	case "users":
		return g.users.getAt(ctx, id, c.Srev, func(u *identityv1.StoredUser) bool {
			return u.GetUser().GetUid() == c.UID && u.GetCredentialGeneration() == c.Gen
		})
	case "applications":
		a, ok := g.apps.get(id)
		return ok && a.GetApplication().GetUid() == c.UID && a.GetCredentialGeneration() == c.Gen && g.creatorCurrent(a)
	case "services":
		return c.Type == ServiceToken
	}
	return false
}

// VerifyRefresh checks a refresh token and returns its subject.
func (g *Guard) VerifyRefresh(ctx context.Context, token string) (Subject, error) {
	c, err := g.parse(ctx, token, RefreshToken)
	if err != nil {
		return Subject{}, err
	}
	return Subject{Principal: c.Subject, UID: c.UID, Gen: c.Gen, Session: c.Sid, Sequence: c.Seq, SessionRevision: c.Srev}, nil
}

// sessionLive reports whether the session an access token belongs to
// still exists: a session ended (a refresh token used twice, an SSO user
// no longer trusted) takes its access tokens with it. The mirror decides
// once it has seen the revision that started the session; before that (a
// token used the moment it was issued, on another replica) etcd does.
func (g *Guard) sessionLive(ctx context.Context, id string, rev int64) bool {
	if _, ok := g.sessions.get(id); ok {
		return true
	}
	if g.sessions.revision() >= rev {
		return false
	}
	resp, err := g.client.Get(ctx, etcdstore.PrefixSessions+id, clientv3.WithCountOnly())
	return err == nil && resp.Count > 0
}

// ServiceCredentials are the per-call credentials a control-plane service
// presents when it calls another: a service token for services/{name},
// renewed before it expires.
func (g *Guard) ServiceCredentials(name string) credentials.PerRPCCredentials {
	return &serviceCreds{g: g, principal: "services/" + name}
}

type serviceCreds struct {
	g         *Guard
	principal string

	mu    sync.Mutex
	token string
	exp   time.Time
}

const serviceTokenTTL = time.Hour

func (s *serviceCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == "" || s.g.now().After(s.exp.Add(-serviceTokenTTL/4)) {
		t, exp, err := s.g.Issue(Subject{Principal: s.principal}, ServiceToken, serviceTokenTTL)
		if err != nil {
			return nil, err
		}
		s.token, s.exp = t, exp
	}
	return map[string]string{"authorization": "Bearer " + s.token}, nil
}

// The control plane's services talk over loopback or a private network in
// plaintext, like the rest of the API.
func (s *serviceCreds) RequireTransportSecurity() bool { return false }

// ProjectCredentials are the per-call credentials of services/{name}
// acting for one project at a time: each call's context names the project
// (ForProject), and the call carries a token of
// services/{name}/projects/{p}, which holds ProjectServiceRole in that
// project only. A call whose context names none fails before it is sent:
// whoever holds these credentials never acts with more than one project's
// access.
func (g *Guard) ProjectCredentials(name string) credentials.PerRPCCredentials {
	return &perCallCreds{g: g, tokens: map[string]*serviceCreds{}, principal: func(ctx context.Context) (string, error) {
		project, _ := ctx.Value(projectKey{}).(string)
		id, ok := strings.CutPrefix(project, "projects/")
		if !ok || id == "" || strings.Contains(id, "/") {
			return "", fmt.Errorf("services/%s acts for one project: the call's context names none (auth.ForProject)", name)
		}
		return "services/" + name + "/" + project, nil
	}}
}

type projectKey struct{}

// ForProject names the project (projects/{p}) the calls made with ctx act
// for, through ProjectCredentials.
func ForProject(ctx context.Context, project string) context.Context {
	return context.WithValue(ctx, projectKey{}, project)
}

// perCallCreds send a token of the principal each call's context names.
type perCallCreds struct {
	g         *Guard
	principal func(context.Context) (string, error)

	mu     sync.Mutex
	tokens map[string]*serviceCreds // by principal; emptied when it grows past maxPerCallTokens
}

const maxPerCallTokens = 4096

func (p *perCallCreds) GetRequestMetadata(ctx context.Context, uri ...string) (map[string]string, error) {
	principal, err := p.principal(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	s := p.tokens[principal]
	if s == nil {
		if len(p.tokens) >= maxPerCallTokens {
			clear(p.tokens)
		}
		s = &serviceCreds{g: p.g, principal: principal}
		p.tokens[principal] = s
	}
	p.mu.Unlock()
	return s.GetRequestMetadata(ctx, uri...)
}

func (p *perCallCreds) RequireTransportSecurity() bool { return false }

// projectOfService is the project (projects/{p}) a service principal
// services/{name}/projects/{p} acts for.
func projectOfService(principal string) (string, bool) {
	rest, ok := strings.CutPrefix(principal, "services/")
	if !ok {
		return "", false
	}
	_, project, ok := strings.Cut(rest, "/")
	id, isProject := strings.CutPrefix(project, "projects/")
	return project, ok && isProject && id != "" && !strings.Contains(id, "/")
}

// Bearer are per-call credentials carrying a fixed token, for clients and
// tests.
type Bearer string

// GetRequestMetadata sends the token as `authorization: Bearer ...`.
func (b Bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: the API is served in plaintext.
func (Bearer) RequireTransportSecurity() bool { return false }
