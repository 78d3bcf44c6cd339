package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/services/identity/oidctest"
)

// session runs the CLI as one person: its own config file (where `runway
// login` keeps the token) and no RUNWAY_TOKEN unless given.
type session struct {
	d      *devServer
	config string
	token  string
}

func (d *devServer) session(t *testing.T, token string) *session {
	return &session{d: d, config: t.TempDir() + "/config.json", token: token}
}

func (s *session) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	env := []string{sdk.EnvServer + "=" + s.d.addr, sdk.EnvConfig + "=" + s.config}
	if s.token != "" {
		env = append(env, sdk.EnvToken+"="+s.token)
	}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, sdk.EnvToken+"=") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return r
}

func (s *session) ok(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := s.run(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("runway %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// The identity commands end to end: the administrator (the dev token)
// creates a user and grants it L1 researcher on team-a; the user signs in
// with its temporary password (setting a new one), sees only team-a's
// workloads, is refused team-b's; an application signs in with its client
// credentials; the audit log shows the refusal.
func TestCLI_IdentityAndAccess(t *testing.T) {
	d := startDev(t)
	admin := d.session(t, d.token)
	admin.ok(t, "", "project", "create", "team-a", "--gpu", "1")
	admin.ok(t, "", "project", "create", "team-b", "--gpu", "1")
	for _, p := range []string{"team-a", "team-b"} {
		admin.ok(t, "", "training", "submit", "w-"+p, "-p", p, "-i", "img", "--", "sleep", "600")
	}

	out := admin.ok(t, "", "user", "create", "alice", "--email", "Alice@Example.com", "--group", "ml-team")
	m := regexp.MustCompile(`temporary password \(shown once, to change at the first sign-in\): (\S+)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("user create printed %q", out)
	}
	temp := m[1]
	out = admin.ok(t, "", "access-rule", "create", "--subject", "user:alice@example.com", "--role", "l1-researcher",
		"--scope", "project:team-a")
	if !strings.Contains(out, "user:alice is l1-researcher in project:team-a") {
		t.Errorf("access-rule create printed %q", out)
	}
	if out := admin.ok(t, "", "role", "list"); !regexp.MustCompile(`l1-researcher +account,department,project +workloads +yes +yes +own +own`).MatchString(out) {
		t.Errorf("role list has no L1 researcher workloads row:\n%s", out)
	}

	alice := d.session(t, "")
	if r := alice.run(t, "", "workload", "list", "-A"); r.code == 0 || !strings.Contains(r.stderr, "[CREDENTIALS_MISSING]") {
		t.Errorf("list without signing in: exit %d %q", r.code, r.stderr)
	}
	out = alice.ok(t, temp+"\nalice's own password\n", "login", "--user", "alice@example.com")
	if !strings.HasPrefix(out, "signed in as users/alice until ") {
		t.Errorf("login printed %q", out)
	}
	if out := alice.ok(t, "", "whoami"); !strings.HasPrefix(out, "users/alice\nGroups: ml-team\n") || !strings.Contains(out, "l1-researcher") {
		t.Errorf("whoami printed %q", out)
	}
	out = alice.ok(t, "", "workload", "list", "-A")
	if !strings.Contains(out, "w-team-a") || strings.Contains(out, "team-b") {
		t.Errorf("alice's workload list -A:\n%s", out)
	}
	for _, args := range [][]string{
		{"workload", "describe", "w-team-b", "-p", "team-b"},
		{"workload", "delete", "w-team-b", "-p", "team-b"},
		{"workload", "delete", "w-team-a", "-p", "team-a"}, // the administrator's, not hers
		{"training", "submit", "x", "-p", "team-b", "-i", "img", "--", "true"},
		{"user", "list"},
	} {
		if r := alice.run(t, "", args...); r.code != 1 || !strings.HasSuffix(r.stderr, "[PERMISSION_DENIED]\n") {
			t.Errorf("alice: runway %s: exit %d %q, want PERMISSION_DENIED", strings.Join(args, " "), r.code, r.stderr)
		}
	}

	// Her application signs in with its client credentials and acts as her.
	out = alice.ok(t, "", "application", "create", "ci")
	m = regexp.MustCompile(`client id: +(\S+)\nclient secret: (\S+)\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("application create printed %q", out)
	}
	if out := alice.ok(t, "", "application", "list"); strings.Contains(out, m[2]) || !strings.Contains(out, m[1]) {
		t.Errorf("application list shows the secret, or not the client id:\n%s", out)
	}
	ci := d.session(t, "")
	if out := ci.ok(t, m[2]+"\n", "login", "--client-id", m[1], "--client-secret-stdin"); !strings.HasPrefix(out, "signed in as applications/ci") {
		t.Errorf("application login printed %q", out)
	}
	if out := ci.ok(t, "", "workload", "list", "-A"); !strings.Contains(out, "w-team-a") || strings.Contains(out, "team-b") {
		t.Errorf("the application's workload list -A:\n%s", out)
	}
	if r := ci.run(t, "wrong\n", "login", "--client-id", m[1], "--client-secret-stdin"); r.code != 1 || !strings.HasSuffix(r.stderr, "[CREDENTIALS_INVALID]\n") {
		t.Errorf("login with a wrong secret: exit %d %q", r.code, r.stderr)
	}
	ci.ok(t, "", "logout")
	if r := ci.run(t, "", "whoami"); r.code != 1 || !strings.HasSuffix(r.stderr, "[CREDENTIALS_MISSING]\n") {
		t.Errorf("whoami after logout: exit %d %q", r.code, r.stderr)
	}

	// Refused calls are stored per source and window (pkg/auth/refused.go):
	// the denied delete is in the audit once its window is flushed.
	denied := ",users/alice,/runway.workload.v1.WorkloadService/DeleteWorkload,projects/team-b/workloads/w-team-b,PermissionDenied,PERMISSION_DENIED,"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		out = admin.ok(t, "", "audit", "list", "--since", "1h", "-o", "csv")
		if strings.Contains(out, denied) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.HasPrefix(out, "time,principal,method,resource,result,reason,source,request_id\n") ||
		!strings.Contains(out, denied) ||
		!strings.Contains(out, ",users/admin,/runway.workload.v1.WorkloadService/CreateWorkload,projects/team-a/workloads/w-team-a,OK,,") {
		t.Errorf("audit list -o csv:\n%s", out)
	}
	for _, secret := range []string{temp, "alice's own password", m[2]} {
		if strings.Contains(out, secret) {
			t.Errorf("the audit log shows a secret")
		}
	}
}

// `runway login --sso`: the device flow at an OpenID provider started in
// the test (the person approves once the CLI polls), then the ID token signs
// in an SSO user whose group's access rule applies.
func TestCLI_SSODeviceLogin(t *testing.T) {
	p := oidctest.New(t)
	d := startDev(t, "--oidc-issuer", p.URL, "--oidc-client-id", "runway")
	d.ok(t, "project", "create", "team-a", "--gpu", "1")
	d.ok(t, "access-rule", "create", "--subject", "group:ml-team", "--role", "viewer", "--scope", "project:team-a")

	go func() {
		for p.Polls() == 0 {
			time.Sleep(50 * time.Millisecond)
		}
		p.Approve("runway", jwt.MapClaims{"sub": "bob-1", "email": "bob@example.com", "email_verified": true,
			"groups": []string{"ml-team"}})
	}()
	bob := d.session(t, "")
	r := bob.run(t, "", "login", "--sso", "--issuer", p.URL, "--sso-client-id", "runway")
	if r.code != 0 || !strings.Contains(r.stderr, "enter the code "+oidctest.UserCode) || !strings.HasPrefix(r.stdout, "signed in as users/") {
		t.Fatalf("login --sso: exit %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
	}
	if p.Polls() < 2 {
		t.Errorf("the CLI polled %d times; want it to wait through authorization_pending", p.Polls())
	}
	if out := bob.ok(t, "", "whoami"); !strings.Contains(out, "viewer") || !strings.Contains(out, "group:ml-team") {
		t.Errorf("whoami after SSO:\n%s", out)
	}
	if out := bob.ok(t, "", "project", "list"); !strings.Contains(out, "team-a") {
		t.Errorf("project list as the SSO viewer:\n%s", out)
	}
	if r := bob.run(t, "", "project", "create", "team-z", "--gpu", "1"); r.code != 1 || !strings.Contains(r.stderr, "[PERMISSION_DENIED]") {
		t.Errorf("a viewer created a project: exit %d, %q", r.code, r.stderr)
	}
	// A token about to expire is traded for a new one with the refresh
	// token the sign-in saved, before the command runs.
	saved := readConfig(t, bob.config)
	if saved.RefreshToken == "" || time.Until(saved.Expiry) < 30*time.Minute {
		t.Fatalf("the sign-in saved no refresh token or a short expiry: %+v", saved)
	}
	saved.Expiry = time.Now().Add(-time.Second)
	writeConfig(t, bob.config, saved)
	bob.ok(t, "", "whoami")
	// (The new token may equal the old one when both are signed in the same
	// second; the expiry set in the past is what only a refresh replaces.)
	if fresh := readConfig(t, bob.config); fresh.Token == "" || fresh.RefreshToken == "" || time.Until(fresh.Expiry) < 30*time.Minute {
		t.Errorf("not refreshed: %+v", fresh)
	}
	signedIn := readConfig(t, bob.config)
	bob.ok(t, "", "logout")
	if c := readConfig(t, bob.config); c.Token != "" || c.RefreshToken != "" {
		t.Errorf("logout left %+v", c)
	}
	// The sign-in ended on the server: a copy of its tokens is refused too
	// (once this process's guard has seen the session go).
	writeConfig(t, bob.config, signedIn)
	deadline := time.Now().Add(10 * time.Second)
	for r := bob.run(t, "", "whoami"); r.code != 1 || !strings.HasSuffix(r.stderr, "[CREDENTIALS_INVALID]\n"); r = bob.run(t, "", "whoami") {
		if time.Now().After(deadline) {
			t.Fatalf("whoami with a copy of the signed-out tokens: exit %d %q", r.code, r.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := bob.run(t, "", "logout"); r.code != 0 || r.stderr != "" {
		t.Errorf("logout with a token already ended: exit %d %q, want a quiet success", r.code, r.stderr)
	}
	if r := bob.run(t, "", "login", "--sso", "--issuer", p.URL); r.code != 2 {
		t.Errorf("--sso without --sso-client-id: exit %d, %q", r.code, r.stderr)
	}
}

func readConfig(t *testing.T, path string) sdk.Config {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c sdk.Config
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func writeConfig(t *testing.T, path string, c sdk.Config) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
