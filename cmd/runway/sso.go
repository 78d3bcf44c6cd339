package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// deviceSignIn runs the OAuth device authorization grant (RFC 8628) at the
// OpenID Connect provider issuer: it prints where to go and the code to
// enter, waits until the person has signed in there (or the code expires),
// and returns the provider's ID token for Runway's client id.
func deviceSignIn(ctx context.Context, issuer, clientID string, out io.Writer) (string, error) {
	p, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return "", fmt.Errorf("single sign-on: %w", err)
	}
	var discovery struct {
		DeviceAuthURL string `json:"device_authorization_endpoint"`
	}
	if err := p.Claims(&discovery); err != nil || discovery.DeviceAuthURL == "" {
		return "", fmt.Errorf("single sign-on: %s offers no device authorization endpoint", issuer)
	}
	conf := &oauth2.Config{ClientID: clientID, Scopes: []string{oidc.ScopeOpenID, "email", "profile", "groups"},
		Endpoint: oauth2.Endpoint{DeviceAuthURL: discovery.DeviceAuthURL, TokenURL: p.Endpoint().TokenURL}}
	da, err := conf.DeviceAuth(ctx)
	if err != nil {
		return "", fmt.Errorf("single sign-on: %w", err)
	}
	where := da.VerificationURI
	if da.VerificationURIComplete != "" {
		where = da.VerificationURIComplete
	}
	fmt.Fprintf(out, "To sign in, open %s and enter the code %s\n", where, da.UserCode)
	tok, err := conf.DeviceAccessToken(ctx, da)
	if err != nil {
		return "", fmt.Errorf("single sign-on: %w", err)
	}
	id, _ := tok.Extra("id_token").(string)
	if id == "" {
		return "", errors.New("single sign-on: the provider returned no ID token (is the openid scope allowed?)")
	}
	return id, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
