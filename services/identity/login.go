package identity

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/oauth2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

var errCredentials = apierr.Unauthenticated(commonv1.ErrorReason_CREDENTIALS_INVALID)

// login exchanges credentials for an access token and a refresh token.
func (s *Server) login(ctx context.Context, req *identityv1.LoginRequest) (*identityv1.LoginResponse, error) {
	var (
		sub auth.Subject
		err error
	)
	switch {
	case req.GetPassword() != nil:
		sub, err = s.loginPassword(ctx, req.GetPassword())
	case req.GetClientCredentials() != nil:
		sub, err = s.loginClient(ctx, req.GetClientCredentials())
	case req.GetOidc() != nil:
		sub, err = s.loginOIDC(ctx, req.GetOidc().GetIdToken())
	case req.GetOidcCode() != nil:
		sub, err = s.loginOIDCCode(ctx, req.GetOidcCode())
	case req.GetRefreshToken() != "":
		sub, err = s.refresh(ctx, req.GetRefreshToken())
	default:
		return nil, apierr.InvalidField("credentials", "send password, client_credentials, oidc, oidc_code or refresh_token")
	}
	if err != nil {
		return nil, err
	}
	if sub.Session == "" {
		if sub, err = s.startSession(ctx, sub, req.GetOidc() != nil || req.GetOidcCode() != nil); err != nil {
			return nil, err
		}
	}
	access, exp, err := s.guard.Issue(sub, auth.AccessToken, s.guard.AccessTTL())
	if err != nil {
		return nil, err
	}
	refresh, _, err := s.guard.Issue(sub, auth.RefreshToken, s.guard.RefreshTTL())
	if err != nil {
		return nil, err
	}
	return &identityv1.LoginResponse{AccessToken: access, TokenType: "Bearer", ExpireTime: timestamppb.New(exp),
		Principal: sub.Principal, RefreshToken: refresh}, nil
}

// findUser resolves a user id, name or email: one read of the user (and,
// for an email, one of its index key), whatever the number of users.
func (s *Server) findUser(ctx context.Context, who string) (etcdstore.Item[*identityv1.StoredUser], bool, error) {
	who = strings.ToLower(strings.TrimSpace(who))
	if !strings.Contains(who, "@") {
		it, err := s.users.Get(ctx, userID(who))
		if errors.Is(err, etcdstore.ErrNotFound) || errors.Is(err, etcdstore.ErrInvalidArgument) {
			return it, false, nil
		}
		return it, err == nil, err
	}
	it, found, err := s.userByIndex(ctx, emailKey(who))
	// An SSO user's email is its provider's word, not a sign-in name.
	if err != nil || !found || it.Msg.GetUser().GetEmail() != who || it.Msg.GetUser().GetIdentityProvider() != "" {
		return etcdstore.Item[*identityv1.StoredUser]{}, false, err
	}
	return it, true, nil
}

func (s *Server) loginPassword(ctx context.Context, p *identityv1.PasswordCredentials) (auth.Subject, error) {
	it, found, err := s.findUser(ctx, p.GetUser())
	if err != nil {
		return auth.Subject{}, err
	}
	// Failures count against the user the name resolves to (its id, email
	// and name alike), an unknown name against itself, and every failure
	// against the caller's address too.
	key := "name:" + strings.ToLower(strings.TrimSpace(p.GetUser()))
	if found {
		key = "user:" + it.Msg.GetUser().GetUid()
	}
	if err := s.admitSignIn(ctx, key); err != nil {
		return auth.Subject{}, err
	}
	// An unknown name costs the bcrypt comparison a known one does, so the
	// time of the answer does not tell which names exist.
	hash := []byte(it.Msg.GetPasswordHash())
	if !found || len(hash) == 0 {
		hash = s.decoyHash()
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(p.GetPassword())) != nil || !found || it.Msg.GetPasswordHash() == "" {
		s.failSignIn(ctx, key)
		return auth.Subject{}, errCredentials
	}
	s.throttle.reset(ctx, key)
	if p.GetNewPassword() != "" {
		if err := checkPassword("password.new_password", p.GetNewPassword()); err != nil {
			return auth.Subject{}, err
		}
		if err := s.setPassword(ctx, it, p.GetNewPassword(), false); err != nil {
			return auth.Subject{}, err
		}
		if it, err = s.users.Get(ctx, it.ID); err != nil {
			return auth.Subject{}, err
		}
	} else if it.Msg.GetUser().GetPasswordChangeRequired() {
		return auth.Subject{}, apierr.FailedPrecondition(commonv1.ErrorReason_PASSWORD_CHANGE_REQUIRED,
			it.Msg.GetUser().GetName(), "The password is temporary; sign in again with a new password.")
	}
	s.touchUser(ctx, it)
	return userSubject(it.Msg), nil
}

// touchUser records the sign-in time; a failure to record it does not fail
// the sign-in.
func (s *Server) touchUser(ctx context.Context, it etcdstore.Item[*identityv1.StoredUser]) {
	next := proto.Clone(it.Msg).(*identityv1.StoredUser)
	next.User.LastLoginTime = s.timestamp()
	if _, err := s.users.Update(ctx, it.ID, next, it.Etag); err != nil {
		s.log.Debug("identity: last sign-in time not recorded", "user", it.Msg.GetUser().GetName(), "err", err)
	}
}

func (s *Server) loginClient(ctx context.Context, cc *identityv1.ClientCredentials) (auth.Subject, error) {
	it, found, err := s.appByClientID(ctx, cc.GetClientId())
	if err != nil {
		return auth.Subject{}, err
	}
	key := "client:" + cc.GetClientId()
	if err := s.admitSignIn(ctx, key); err != nil {
		return auth.Subject{}, err
	}
	if !found || !secretMatches(it.Msg.GetSecretHash(), cc.GetClientSecret()) || !s.creatorCurrent(ctx, it.Msg) {
		s.failSignIn(ctx, key)
		return auth.Subject{}, errCredentials
	}
	s.throttle.reset(ctx, key)
	a := it.Msg.GetApplication()
	next := proto.Clone(it.Msg).(*identityv1.StoredApplication)
	next.Application.LastLoginTime = s.timestamp()
	if _, err := s.apps.Update(ctx, it.ID, next, it.Etag); err != nil {
		s.log.Debug("identity: last sign-in time not recorded", "application", a.GetName(), "err", err)
	}
	return auth.Subject{Principal: a.GetName(), UID: a.GetUid(), Gen: it.Msg.GetCredentialGeneration()}, nil
}

// creatorCurrent: a user application signs in only while the user who made
// it exists (not another user re-created with the same id).
func (s *Server) creatorCurrent(ctx context.Context, a *identityv1.StoredApplication) bool {
	if !userApp(a.GetApplication()) {
		return true
	}
	u, err := s.users.Get(ctx, userID(a.GetApplication().GetCreator()))
	return err == nil && (a.GetCreatorUid() == "" || u.Msg.GetUser().GetUid() == a.GetCreatorUid())
}

// oidcVerifier checks ID tokens of the configured provider; endpoint and
// client redeem its authorization codes.
type oidcVerifier struct {
	verifier *oidc.IDTokenVerifier
	endpoint oauth2.Endpoint
	client   *http.Client
}

// discoveryRetry is how long a failed discovery is not tried again: the
// sign-in options are public, and a caller should not make the server
// fetch from the provider on every call while it is down.
const discoveryRetry = 5 * time.Second

// verifierFor fetches the provider's discovery document at the first OIDC
// sign-in (and again after a failure), so the server starts without it.
func (s *Server) verifierFor() (*oidcVerifier, error) {
	s.oidcMu.Lock()
	defer s.oidcMu.Unlock()
	if s.oidc != nil {
		return s.oidc, nil
	}
	if s.oidcErr != nil && time.Since(s.oidcErrAt) < discoveryRetry {
		return nil, s.oidcErr
	}
	client := s.cfg.OIDC.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	// The provider keeps this context to fetch rotated keys later, so it is
	// not a request's (which ends with the call).
	p, err := oidc.NewProvider(oidc.ClientContext(context.Background(), client), s.cfg.OIDC.Issuer)
	if err != nil {
		s.oidcErr, s.oidcErrAt = fmt.Errorf("identity: OpenID provider %s: %w", s.cfg.OIDC.Issuer, err), time.Now()
		return nil, s.oidcErr
	}
	s.oidc = &oidcVerifier{verifier: p.Verifier(&oidc.Config{ClientID: s.cfg.OIDC.ClientID}), endpoint: p.Endpoint(), client: client}
	return s.oidc, nil
}

var notID = regexp.MustCompile(`[^a-z0-9]+`)

// ssoUserID is an SSO user's id: a readable slug of its email (or "sso")
// and a hash of who it is, (issuer, sub), so two users whose emails slug
// alike (a.b@x and a-b@x) are two ids, and no email chooses an id.
func ssoUserID(issuer, sub, email string) string {
	slug := strings.Trim(notID.ReplaceAllString(strings.ToLower(email), "-"), "-")
	if len(slug) > 40 {
		slug = strings.TrimRight(slug[:40], "-")
	}
	if slug == "" || slug[0] < 'a' || slug[0] > 'z' {
		slug = "sso-" + slug
	}
	h := sha256.Sum256([]byte(issuer + "\x00" + sub))
	return strings.TrimRight(slug, "-") + "-" + hex.EncodeToString(h[:6])
}

// ssoClaims are what an ID token says about its user.
type ssoClaims struct {
	sub, email    string
	emailVerified bool
	groups        []string
}

// loginOIDC verifies an ID token and signs in the SSO user it is for, by
// (issuer, sub): found, linked to an existing user by a verified email where
// the deployment allows it, or created. Its groups are the token's.
func (s *Server) loginOIDC(ctx context.Context, raw string) (auth.Subject, error) {
	if s.cfg.OIDC == nil {
		return auth.Subject{}, apierr.InvalidField("oidc", "single sign-on is not configured")
	}
	v, err := s.verifierFor()
	if err != nil {
		return auth.Subject{}, err
	}
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		return auth.Subject{}, errCredentials
	}
	var all map[string]any
	if err := tok.Claims(&all); err != nil {
		return auth.Subject{}, errCredentials
	}
	c := ssoClaims{sub: tok.Subject}
	c.email, _ = all["email"].(string)
	c.email = strings.ToLower(strings.TrimSpace(c.email))
	c.emailVerified, _ = all["email_verified"].(bool)
	if c.sub == "" {
		return auth.Subject{}, errCredentials
	}
	claim := s.cfg.OIDC.GroupsClaim
	if claim == "" {
		claim = "groups"
	}
	if gs, ok := all[claim].([]any); ok {
		for _, g := range gs {
			if g, ok := g.(string); ok {
				c.groups = append(c.groups, g)
			}
		}
	}
	return s.upsertSSOUser(ctx, c)
}

// sameSignIn reports whether stored already holds what the sign-in that
// made want would write, its sign-in time apart.
func sameSignIn(stored, want *identityv1.StoredUser) bool {
	a, b := stored.GetUser(), want.GetUser()
	return a.GetUid() == b.GetUid() && stored.GetOidcSubject() == want.GetOidcSubject() && a.GetIdentityProvider() == b.GetIdentityProvider() &&
		a.GetEmail() == b.GetEmail() && slices.Equal(a.GetGroups(), b.GetGroups()) &&
		stored.GetCredentialGeneration() == want.GetCredentialGeneration()
}

// ssoCandidate is the user an SSO sign-in is for: the one of its (issuer,
// sub), else (linked) the local user its verified email links to where the
// deployment allows it, else none (a new user). Index reads only.
func (s *Server) ssoCandidate(ctx context.Context, c ssoClaims) (*etcdstore.Item[*identityv1.StoredUser], bool, error) {
	issuer := s.cfg.OIDC.Issuer
	it, ok, err := s.userByIndex(ctx, ssoKey(issuer, c.sub))
	if err != nil {
		return nil, false, err
	}
	if ok && it.Msg.GetUser().GetIdentityProvider() == issuer && it.Msg.GetOidcSubject() == c.sub {
		return &it, false, nil
	}
	if !s.cfg.OIDC.LinkVerifiedEmail || !c.emailVerified || c.email == "" {
		return nil, false, nil
	}
	it, ok, err = s.findUser(ctx, c.email)
	if err != nil || !ok || it.Msg.GetOidcSubject() != "" {
		return nil, false, err
	}
	// Never link to a user with an account-wide role: the sign-in becomes
	// a user of its own.
	if wide, err := s.accountWide(ctx, it.Msg.GetUser().GetName()); err != nil || wide {
		return nil, false, err
	}
	return &it, true, nil
}

func (s *Server) upsertSSOUser(ctx context.Context, c ssoClaims) (auth.Subject, error) {
	issuer := s.cfg.OIDC.Issuer
	for attempt := 0; attempt < 3; attempt++ {
		now := s.timestamp()
		found, linked, err := s.ssoCandidate(ctx, c)
		if err != nil {
			return auth.Subject{}, err
		}
		if found == nil {
			id := ssoUserID(issuer, c.sub, c.email)
			u := &identityv1.StoredUser{CredentialGeneration: 1, OidcSubject: c.sub, User: &identityv1.User{
				Name: "users/" + id, Uid: newUID(), Email: c.email, Groups: c.groups, IdentityProvider: issuer,
				CreateTime: now, UpdateTime: now, LastLoginTime: now}}
			if _, err := s.users.WriteIndexed(ctx, id, u, 0, ssoKey(issuer, c.sub)); errors.Is(err, etcdstore.ErrAlreadyExists) {
				continue
			} else if err != nil {
				return auth.Subject{}, err
			}
			return userSubject(u), nil
		}
		next := proto.Clone(found.Msg).(*identityv1.StoredUser)
		next.OidcSubject = c.sub
		next.User.IdentityProvider = issuer
		next.User.Groups, next.User.LastLoginTime, next.User.UpdateTime = c.groups, now, now
		if c.email != "" && found.Msg.GetOidcSubject() != "" {
			next.User.Email = c.email
		}
		var index []string
		if linked {
			index = append(index, ssoKey(issuer, c.sub)) // found by (issuer, sub) from now on
		}
		if _, err := s.users.WriteIndexed(ctx, found.ID, next, found.Revision, index...); errors.Is(err, etcdstore.ErrEtagMismatch) {
			// The usual writer in between is another sign-in of the same
			// user (a browser's tabs, a CLI and the UI at once): when it
			// wrote what this one would, this sign-in is done too.
			if cur, err := s.users.Get(ctx, found.ID); err == nil && sameSignIn(cur.Msg, next) {
				return userSubject(cur.Msg), nil
			}
			continue
		} else if err != nil {
			return auth.Subject{}, err
		}
		return userSubject(next), nil
	}
	return auth.Subject{}, apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second)
}
