package main

import (
	"github.com/spf13/pflag"

	"github.com/runwayhq/runway/services/identity"
)

// oidcFlags configure sign-in through an OpenID Connect provider
// (`runway dev` and `runway serve identity`).
type oidcFlags struct {
	issuer, clientID, groupsClaim string
	linkVerifiedEmail             bool
}

func (o *oidcFlags) add(f *pflag.FlagSet) {
	f.StringVar(&o.issuer, "oidc-issuer", "", "issuer URL of the OpenID Connect provider whose ID tokens sign users in (SSO)")
	f.StringVar(&o.clientID, "oidc-client-id", "", "Runway's client id at the provider (the ID tokens' audience)")
	f.StringVar(&o.groupsClaim, "oidc-groups-claim", "groups", "the ID token claim listing the user's groups")
	f.BoolVar(&o.linkVerifiedEmail, "oidc-link-verified-email", false,
		"let an SSO sign-in with a verified email (email_verified) become the existing user with that email, never users/admin or a user with an account-wide role; otherwise every new issuer and subject is a new user")
}

// config is the identity service's OIDC setting; nil without an issuer.
func (o *oidcFlags) config() (*identity.OIDCConfig, error) {
	if o.issuer == "" {
		if o.clientID != "" {
			return nil, usageError("--oidc-client-id needs --oidc-issuer")
		}
		return nil, nil
	}
	if o.clientID == "" {
		return nil, usageError("--oidc-issuer needs --oidc-client-id")
	}
	return &identity.OIDCConfig{Issuer: o.issuer, ClientID: o.clientID, GroupsClaim: o.groupsClaim,
		LinkVerifiedEmail: o.linkVerifiedEmail}, nil
}
