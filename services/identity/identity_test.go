package identity_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
)

func wantCode(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if apierr.Code(err) != code || reason != "" && apierr.Reason(err) != reason {
		t.Fatalf("%s: got %v (%s), want %v %s", what, apierr.Code(err), err, code, reason)
	}
}

const (
	userKind = identityv1.SubjectKind_SUBJECT_KIND_USER
	appKind  = identityv1.SubjectKind_SUBJECT_KIND_APPLICATION
)

// A new user's password is temporary: it signs in only while setting a new
// one; a reset makes a new temporary one and ends the tokens issued before.
func TestTemporaryPasswordAndReset(t *testing.T) {
	e := newEnv(t)
	u, err := e.admin.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "alice",
		User: &identityv1.User{Email: "Alice@Example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	temp := u.GetTemporaryPassword()
	if len(temp) < 12 || !u.GetPasswordChangeRequired() || u.GetEmail() != "alice@example.com" {
		t.Fatalf("CreateUser = %v", u)
	}
	got, err := e.admin.GetUser(t.Context(), &identityv1.GetUserRequest{Name: "users/alice"})
	if err != nil || got.GetTemporaryPassword() != "" || got.GetPassword() != "" {
		t.Fatalf("GetUser = %v, %v: the password must never be returned again", got, err)
	}
	e.sync(t)
	_, err = e.login(t, "alice", temp, "")
	wantCode(t, "Login with the temporary password alone", err, codes.FailedPrecondition, "PASSWORD_CHANGE_REQUIRED")
	_, err = e.login(t, "alice", temp, "short")
	wantCode(t, "Login with a short new password", err, codes.InvalidArgument, "INVALID_FIELD")
	r, err := e.login(t, "alice@example.com", temp, "alice's chosen password")
	if err != nil || r.GetPrincipal() != "users/alice" || r.GetTokenType() != "Bearer" {
		t.Fatalf("Login by email with a new password = %v, %v", r, err)
	}
	_, err = e.login(t, "alice", temp, "")
	wantCode(t, "Login with the old temporary password", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	alice := e.client(t, r.GetAccessToken())
	if c, err := alice.GetCaller(t.Context(), &identityv1.GetCallerRequest{}); err != nil || c.GetPrincipal() != "users/alice" {
		t.Fatalf("GetCaller = %v, %v", c, err)
	}

	reset, err := e.admin.ResetUserPassword(t.Context(), &identityv1.ResetUserPasswordRequest{Name: "users/alice"})
	if err != nil || reset.GetTemporaryPassword() == "" || !reset.GetPasswordChangeRequired() {
		t.Fatalf("ResetUserPassword = %v, %v", reset, err)
	}
	e.sync(t)
	_, err = alice.GetCaller(t.Context(), &identityv1.GetCallerRequest{})
	wantCode(t, "a token issued before the reset", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	_, err = e.login(t, "alice", reset.GetTemporaryPassword(), "")
	wantCode(t, "Login after the reset", err, codes.FailedPrecondition, "PASSWORD_CHANGE_REQUIRED")
	// The refresh token works until the credentials change, too.
	_, err = e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_RefreshToken{RefreshToken: r.GetRefreshToken()}})
	wantCode(t, "refresh after the reset", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
}

// Repeated failures lock the user out, even with the right password then.
func TestSignInThrottling(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "bob")
	for i := range 5 {
		_, err := e.login(t, "bob", "wrong password number", "")
		wantCode(t, "wrong password", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
		_ = i
	}
	_, err := e.login(t, "bob", pw, "")
	wantCode(t, "the right password after 5 failures", err, codes.ResourceExhausted, "TOO_MANY_SIGN_IN_ATTEMPTS")
	e.clock.Add(6 * time.Minute)
	if _, err := e.login(t, "bob", pw, ""); err != nil {
		t.Fatalf("Login after the window: %v", err)
	}
}

// Expired, tampered, wrongly signed and revoked tokens are refused alike;
// refresh gives a new access token.
func TestTokensRefused(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "carol")
	e.grant(t, userKind, "users/carol", "roles/l1-researcher")
	r, err := e.login(t, "carol", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	call := func(token string) error {
		_, err := e.client(t, token).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
		return err
	}
	if err := call(r.GetAccessToken()); err != nil {
		t.Fatalf("a fresh token: %v", err)
	}
	wantCode(t, "no token", call(""), codes.Unauthenticated, "CREDENTIALS_MISSING")
	wantCode(t, "the refresh token as an access token", call(r.GetRefreshToken()), codes.Unauthenticated, "CREDENTIALS_INVALID")

	parts := strings.Split(r.GetAccessToken(), ".")
	claims, _ := jwt.NewParser().DecodeSegment(parts[1])
	forged := strings.Replace(string(claims), `"users/carol"`, `"users/admin"`, 1)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2]
	wantCode(t, "a tampered token", call(tampered), codes.Unauthenticated, "CREDENTIALS_INVALID")

	// Same claims and key id, another key.
	var parsed jwt.MapClaims
	tok, _, _ := jwt.NewParser().ParseUnverified(r.GetAccessToken(), &parsed)
	other := jwt.NewWithClaims(jwt.SigningMethodHS256, parsed)
	other.Header["kid"] = tok.Header["kid"]
	wrongKey, err := other.SignedString([]byte("a key that is not in etcd, 32 bytes"))
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a token signed with another key", call(wrongKey), codes.Unauthenticated, "CREDENTIALS_INVALID")

	refreshed, err := e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_RefreshToken{RefreshToken: r.GetRefreshToken()}})
	if err != nil || refreshed.GetPrincipal() != "users/carol" {
		t.Fatalf("refresh: %v, %v", refreshed, err)
	}
	e.clock.Add(auth.DefaultAccessTTL + time.Minute)
	wantCode(t, "an expired token", call(r.GetAccessToken()), codes.Unauthenticated, "CREDENTIALS_INVALID")

	// An application's token dies with its secret and with the application.
	e.clock.Add(-auth.DefaultAccessTTL - time.Minute)
	carol := e.client(t, r.GetAccessToken())
	app, err := carol.CreateApplication(t.Context(), &identityv1.CreateApplicationRequest{ApplicationId: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	appLogin := func(secret string) (*identityv1.LoginResponse, error) {
		return e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_ClientCredentials{
			ClientCredentials: &identityv1.ClientCredentials{ClientId: app.GetClientId(), ClientSecret: secret}}})
	}
	ar, err := appLogin(app.GetClientSecret())
	if err != nil || ar.GetPrincipal() != "applications/ci" {
		t.Fatalf("application Login = %v, %v", ar, err)
	}
	e.sync(t)
	if err := call(ar.GetAccessToken()); err != nil {
		t.Fatalf("the application's token: %v", err)
	}
	regen, err := carol.RegenerateApplicationSecret(t.Context(), &identityv1.RegenerateApplicationSecretRequest{Name: "applications/ci"})
	if err != nil || regen.GetClientSecret() == "" || regen.GetClientSecret() == app.GetClientSecret() {
		t.Fatalf("RegenerateApplicationSecret = %v, %v", regen, err)
	}
	e.sync(t)
	wantCode(t, "a token from the old secret", call(ar.GetAccessToken()), codes.Unauthenticated, "CREDENTIALS_INVALID")
	_, err = appLogin(app.GetClientSecret())
	wantCode(t, "Login with the old secret", err, codes.Unauthenticated, "CREDENTIALS_INVALID")
	ar2, err := appLogin(regen.GetClientSecret())
	if err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	if _, err := carol.DeleteApplication(t.Context(), &identityv1.DeleteApplicationRequest{Name: "applications/ci"}); err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	wantCode(t, "the token of a deleted application", call(ar2.GetAccessToken()), codes.Unauthenticated, "CREDENTIALS_INVALID")
}

// A rotated key keeps verifying the tokens it signed until they expire,
// while the new key signs.
func TestKeyRotationKeepsTokensValid(t *testing.T) {
	e := newEnv(t, func(o *options) { o.cfg.Rotation = 30 * time.Minute })
	pw := e.user(t, "dave")
	kid := func(token string) string {
		tok, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Header["kid"].(string)
	}
	call := func(token string) error {
		_, err := e.client(t, token).GetCaller(t.Context(), &identityv1.GetCallerRequest{})
		return err
	}
	old, err := e.login(t, "dave", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Add(40 * time.Minute)
	if err := e.guard.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.sync(t)
	fresh, err := e.login(t, "dave", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	if kid(old.GetAccessToken()) == kid(fresh.GetAccessToken()) {
		t.Fatal("the key did not rotate")
	}
	if err := call(old.GetAccessToken()); err != nil {
		t.Fatalf("a token of the rotated key, before it expires: %v", err)
	}
	e.clock.Add(25 * time.Minute) // past the old token's hour, within the new one's
	wantCode(t, "the old token after its expiry", call(old.GetAccessToken()), codes.Unauthenticated, "CREDENTIALS_INVALID")
	if err := call(fresh.GetAccessToken()); err != nil {
		t.Fatalf("a token of the new key: %v", err)
	}
}

// Secrets are shown once: never again in responses, never in the logs or
// the audit log.
func TestSecretsNeverLeak(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "erin")
	e.grant(t, userKind, "users/erin", "roles/l1-researcher")
	r, err := e.login(t, "erin", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	erin := e.client(t, r.GetAccessToken())
	app, err := erin.CreateApplication(t.Context(), &identityv1.CreateApplicationRequest{ApplicationId: "pipeline"})
	if err != nil || len(app.GetClientSecret()) < 32 || app.GetCreator() != "users/erin" {
		t.Fatalf("CreateApplication = %v, %v", app, err)
	}
	e.sync(t)
	ar, err := e.client(t, "").Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_ClientCredentials{
		ClientCredentials: &identityv1.ClientCredentials{ClientId: app.GetClientId(), ClientSecret: app.GetClientSecret()}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := erin.GetApplication(t.Context(), &identityv1.GetApplicationRequest{Name: "applications/pipeline"})
	if err != nil || got.GetClientSecret() != "" || got.GetClientId() != app.GetClientId() {
		t.Fatalf("GetApplication = %v, %v", got, err)
	}
	list, err := erin.ListApplications(t.Context(), &identityv1.ListApplicationsRequest{})
	if err != nil || len(list.GetApplications()) != 1 || list.GetApplications()[0].GetClientSecret() != "" {
		t.Fatalf("ListApplications = %v, %v", list, err)
	}
	users, err := e.admin.ListUsers(t.Context(), &identityv1.ListUsersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var audit []string
	eventuallyAudit(t, e, func(evs []*identityv1.AuditEvent) bool {
		audit = audit[:0]
		for _, ev := range evs {
			audit = append(audit, prototext.Format(ev))
		}
		return strings.Contains(strings.Join(audit, ""), "CreateApplication")
	})
	secrets := map[string]string{"client secret": app.GetClientSecret(), "password": pw, "first password": "first password of erin",
		"bootstrap password": e.password, "access token": r.GetAccessToken(), "application token": ar.GetAccessToken()}
	places := map[string]string{"logs": e.logs.String(), "audit log": strings.Join(audit, "\n"),
		"ListUsers": prototext.Format(users), "GetApplication": prototext.Format(got)}
	for what, secret := range secrets {
		for where, text := range places {
			if strings.Contains(text, secret) {
				t.Errorf("the %s appears in the %s", what, where)
			}
		}
	}
	if !strings.Contains(e.logs.String(), "CreateApplication") {
		t.Error("the logs have no access log line at all: the check above proves nothing")
	}
}

func eventuallyAudit(t *testing.T, e *env, done func([]*identityv1.AuditEvent) bool) []*identityv1.AuditEvent {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.admin.ListAuditEvents(t.Context(), &identityv1.ListAuditEventsRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if done(r.GetAuditEvents()) {
			return r.GetAuditEvents()
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit log never as expected: %v", r.GetAuditEvents())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A user may have at most 20 applications.
func TestApplicationLimit(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "frank")
	e.grant(t, userKind, "users/frank", "roles/l2-researcher")
	r, err := e.login(t, "frank", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	frank := e.client(t, r.GetAccessToken())
	for i := range 20 {
		if _, err := frank.CreateApplication(t.Context(), &identityv1.CreateApplicationRequest{
			ApplicationId: "app-" + string(rune('a'+i))}); err != nil {
			t.Fatalf("application %d: %v", i+1, err)
		}
	}
	_, err = frank.CreateApplication(t.Context(), &identityv1.CreateApplicationRequest{ApplicationId: "one-too-many"})
	wantCode(t, "the 21st application", err, codes.ResourceExhausted, "APPLICATION_LIMIT_EXCEEDED")
}

// A denied call is audited with its code; the log pages newest first.
func TestAuditDeniedCallAndPages(t *testing.T) {
	e := newEnv(t)
	pw := e.user(t, "gina")
	r, err := e.login(t, "gina", pw, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.client(t, r.GetAccessToken()).CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "mallory",
		User: &identityv1.User{Email: "m@example.com"}})
	wantCode(t, "CreateUser without a role", err, codes.PermissionDenied, "PERMISSION_DENIED")
	evs := eventuallyAudit(t, e, func(evs []*identityv1.AuditEvent) bool {
		return len(evs) > 0 && evs[0].GetMethod() == "/runway.identity.v1.IdentityService/CreateUser"
	})
	denied := evs[0]
	if denied.GetPrincipal() != "users/gina" || denied.GetResource() != "users/mallory" ||
		denied.GetStatusCode() != int32(codes.PermissionDenied) || denied.GetErrorReason() != "PERMISSION_DENIED" ||
		!strings.HasPrefix(denied.GetPeerAddress(), "127.0.0.1:") || denied.GetRequestId() == "" {
		t.Errorf("the denied call's event = %v", denied)
	}
	// Pages of 2 walk the same events, newest first, without repeats.
	var paged []string
	token := ""
	for {
		p, err := e.admin.ListAuditEvents(t.Context(), &identityv1.ListAuditEventsRequest{PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range p.GetAuditEvents() {
			paged = append(paged, ev.GetName())
		}
		if token = p.GetNextPageToken(); token == "" {
			break
		}
	}
	var all []string
	for _, ev := range evs {
		all = append(all, ev.GetName())
	}
	if strings.Join(paged, ",") != strings.Join(all, ",") || len(all) < 3 {
		t.Errorf("paged %v, want %v", paged, all)
	}
	f, err := e.admin.ListAuditEvents(t.Context(), &identityv1.ListAuditEventsRequest{Filter: `status_code != 0 AND principal = "users/gina"`})
	if err != nil || len(f.GetAuditEvents()) != 1 || f.GetAuditEvents()[0].GetName() != denied.GetName() {
		t.Errorf("filtered = %v, %v", f, err)
	}
}
