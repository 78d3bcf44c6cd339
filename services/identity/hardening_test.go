package identity_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/services/identity"
	"github.com/runwayhq/runway/services/identity/oidctest"
)

// A failed password sign-in's user field is what was typed, often the
// password in the wrong box: the audit log never keeps it. A sign-in that
// succeeds names the user it resolved to, not the typed string.
func TestFailedSignInAuditKeepsNoTypedName(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "hana")
	const typed = "hana-Secret-Typed-In-The-User-Box-42"
	if _, err := e.login(t, typed, "whatever it was", ""); apierr.Code(err) != codes.Unauthenticated {
		t.Fatalf("Login as %q: %v, want Unauthenticated", typed, err)
	}
	if _, err := e.login(t, "HANA@example.com", pw, ""); err != nil {
		t.Fatal(err)
	}
	evs := eventuallyAudit(t, e, func(evs []*identityv1.AuditEvent) bool {
		n := 0
		for _, ev := range evs {
			if strings.HasSuffix(ev.GetMethod(), "/Login") {
				n++
			}
		}
		return n >= 3 // the user's first sign-in, the failed one, the last
	})
	var failed, ok int
	for _, ev := range evs {
		if strings.Contains(ev.String(), typed) || strings.Contains(strings.ToLower(ev.String()), "hana@example.com") {
			t.Errorf("an audit event keeps the typed user field: %v", ev)
		}
		if !strings.HasSuffix(ev.GetMethod(), "/Login") {
			continue
		}
		if ev.GetStatusCode() == int32(codes.Unauthenticated) {
			failed++
			if ev.GetResource() != "" || ev.GetPrincipal() != "" {
				t.Errorf("the failed sign-in's event names %q / %q", ev.GetResource(), ev.GetPrincipal())
			}
		} else if ev.GetStatusCode() == 0 {
			ok++
			if ev.GetResource() != "users/hana" {
				t.Errorf("a successful sign-in's event names %q, want users/hana", ev.GetResource())
			}
		}
	}
	if failed != 1 || ok < 2 {
		t.Errorf("%d failed and %d successful sign-ins audited, want 1 and at least 2", failed, ok)
	}
}

// bcrypt reads 72 bytes of a password at most: a longer one is refused with
// its field (never an Internal error, never cut short in silence), wherever
// a password is set; 72 bytes are taken.
func TestPasswordOver72Bytes(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("é", 37) // 74 bytes, 37 characters
	_, err := e.admin.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "ivo",
		User: &identityv1.User{Email: "ivo@example.com", Password: long}})
	wantCode(t, "CreateUser with a 74-byte password", err, codes.InvalidArgument, "")
	if !strings.Contains(err.Error(), "user.password") || !strings.Contains(err.Error(), "72 bytes") {
		t.Errorf("CreateUser with a 74-byte password: %v, want the field and the limit", err)
	}
	first := "first password of ivo"
	if _, err := e.admin.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "ivo",
		User: &identityv1.User{Email: "ivo@example.com", Password: first}}); err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	_, err = e.login(t, "ivo", first, long)
	wantCode(t, "a 74-byte new password", err, codes.InvalidArgument, "")
	if !strings.Contains(err.Error(), "password.new_password") {
		t.Errorf("a 74-byte new password: %v, want the field", err)
	}
	if _, err := e.login(t, "ivo", first, strings.Repeat("x", identity.MaxPasswordBytes)); err != nil {
		t.Errorf("a 72-byte new password: %v", err)
	}
}

// --oidc-link-verified-email links an SSO sign-in to the local user of the
// same email, but never to one with a role on the whole account (users/admin
// above all): whoever holds that address at the provider would become an
// account administrator. Such a sign-in is a user of its own.
func TestOIDCLinkNeverToAccountWideUser(t *testing.T) {
	p := oidctest.New(t)
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	e := newEnv(t, func(o *options) {
		o.auth.OIDC = &identity.OIDCConfig{Issuer: p.URL, ClientID: "runway", LinkVerifiedEmail: true,
			HTTPClient: &http.Client{Transport: transport}}
	})
	login := func(sub, email string) string {
		t.Helper()
		r, err := e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Oidc{
			Oidc: &identityv1.OidcCredentials{IdToken: p.IDToken(t, nil, jwt.MapClaims{"sub": sub, "email": email, "email_verified": true})}}})
		if err != nil {
			t.Fatalf("SSO Login %s: %v", email, err)
		}
		return r.GetPrincipal()
	}
	if got := login("evil-1", "admin@runway.local"); got == identity.BootstrapAdmin {
		t.Errorf("a verified admin@runway.local signed in as %s", got)
	}
	e.user(t, "ops")
	e.grant(t, userKind, "users/ops", "roles/viewer") // a role on the whole account, however small
	if got := login("evil-2", "ops@example.com"); got == "users/ops" {
		t.Errorf("a verified ops@example.com signed in as %s, which holds an account-wide role", got)
	}
	e.user(t, "pat") // no account-wide role: linked as before
	if got := login("pat-sub", "pat@example.com"); got != "users/pat" {
		t.Errorf("a verified pat@example.com signed in as %s, want users/pat", got)
	}
	admin, err := e.admin.GetUser(t.Context(), &identityv1.GetUserRequest{Name: identity.BootstrapAdmin})
	if err != nil || admin.GetIdentityProvider() != "" {
		t.Errorf("users/admin after the sign-in: %v, %v", admin, err)
	}
}
