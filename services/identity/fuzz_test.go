package identity

import (
	"testing"
)

// FuzzParseFilter: any filter text is parsed or refused, never a panic.
func FuzzParseFilter(f *testing.F) {
	fields := map[string]bool{"email": true, "groups": true, "status_code": true, "create_time": true}
	for _, s := range []string{`email = "a@b"`, `groups:ml AND status_code != 0`, `create_time >= "2026-01-01T00:00:00Z"`, `nope = 1`, `=`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		fl, err := parseFilter(expr, fields)
		if err == nil {
			_ = fl.matches(map[string][]string{"email": {"a@b"}, "groups": {"ml"}})
		}
	})
}

// FuzzSSOUserID: whatever the issuer, subject and email, an SSO user's id is
// a valid id, and different subjects give different ids.
func FuzzSSOUserID(f *testing.F) {
	f.Add("https://login.example.com", "12345", "a.b@example.com")
	f.Add("", "", "")
	f.Add("i", "s", "9@@--.")
	f.Fuzz(func(t *testing.T, issuer, sub, email string) {
		id := ssoUserID(issuer, sub, email)
		if err := checkID("id", id); err != nil {
			t.Fatalf("ssoUserID(%q, %q, %q) = %q: %v", issuer, sub, email, id, err)
		}
		if ssoUserID(issuer, sub+"x", email) == id {
			t.Fatalf("two subjects share the id %q", id)
		}
	})
}
