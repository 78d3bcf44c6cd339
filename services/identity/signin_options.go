package identity

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"golang.org/x/oauth2"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
)

// GetSignInOptions tells a sign-in page (before anyone is signed in) where
// single sign-on is. The issuer, client id and authorization endpoint are
// what the provider shows the world anyway; nothing else is said.
func (s *Server) GetSignInOptions(context.Context, *identityv1.GetSignInOptionsRequest) (*identityv1.SignInOptions, error) {
	out := &identityv1.SignInOptions{}
	o := s.cfg.OIDC
	if o == nil {
		return out, nil
	}
	out.SingleSignOn = &identityv1.SingleSignOn{Issuer: o.Issuer, ClientId: o.ClientID}
	// A provider that cannot be reached now leaves the endpoint empty: the
	// page says SSO is unavailable rather than failing to load.
	if v, err := s.verifierFor(); err == nil {
		out.SingleSignOn.AuthorizationEndpoint = v.endpoint.AuthURL
	}
	return out, nil
}

// Bounds on an authorization code sign-in (RFC 7636 fixes the verifier's).
// Each one is a request to the provider made for a caller with no token, so
// at most MaxCodeRedemptions are in flight per replica; more are refused at
// once rather than queued.
const (
	maxCodeLen         = 4096
	maxRedirectURILen  = 2048
	MaxCodeRedemptions = 8
)

var codeVerifier = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// loginOIDCCode redeems an authorization code at the provider's token
// endpoint with the caller's PKCE verifier, as the public client the
// browser is, and signs in with the ID token the provider returns. The
// provider checks the code, the verifier against the challenge and the
// redirect URI; the ID token is verified as any other.
func (s *Server) loginOIDCCode(ctx context.Context, c *identityv1.OidcAuthorizationCode) (auth.Subject, error) {
	if s.cfg.OIDC == nil {
		return auth.Subject{}, apierr.InvalidField("oidc_code", "single sign-on is not configured")
	}
	if c.GetCode() == "" || len(c.GetCode()) > maxCodeLen {
		return auth.Subject{}, apierr.InvalidField("oidc_code.code", "required, at most 4096 characters")
	}
	if !codeVerifier.MatchString(c.GetCodeVerifier()) {
		return auth.Subject{}, apierr.InvalidField("oidc_code.code_verifier", "43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_', '~'")
	}
	if u, err := url.Parse(c.GetRedirectUri()); err != nil || len(c.GetRedirectUri()) > maxRedirectURILen ||
		(u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return auth.Subject{}, apierr.InvalidField("oidc_code.redirect_uri", "an http or https URL of at most 2048 characters")
	}
	select {
	case s.redeeming <- struct{}{}:
		defer func() { <-s.redeeming }()
	default:
		return auth.Subject{}, apierr.TooManySignInAttempts(time.Second)
	}
	v, err := s.verifierFor()
	if err != nil {
		return auth.Subject{}, err
	}
	// A public client has no secret: client_id goes in the form (RFC 6749
	// 2.3, 3.2.1), not in a Basic header with an empty password.
	ep := v.endpoint
	ep.AuthStyle = oauth2.AuthStyleInParams
	conf := oauth2.Config{ClientID: s.cfg.OIDC.ClientID, Endpoint: ep, RedirectURL: c.GetRedirectUri()}
	tok, err := conf.Exchange(context.WithValue(ctx, oauth2.HTTPClient, v.client), c.GetCode(), oauth2.VerifierOption(c.GetCodeVerifier()))
	var refused *oauth2.RetrieveError
	if errors.As(err, &refused) {
		// The provider refused the code (used, expired, another verifier or
		// redirect URI): wrong credentials, as any other.
		return auth.Subject{}, errCredentials
	}
	if err != nil {
		return auth.Subject{}, fmt.Errorf("identity: redeem an authorization code at %s: %w", s.cfg.OIDC.Issuer, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return auth.Subject{}, errCredentials
	}
	return s.loginOIDC(ctx, raw)
}
