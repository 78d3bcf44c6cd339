package auth

import (
	"strings"
	"testing"
	"time"
)

// FuzzTokens: access tokens and page tokens are parsed without a panic, and
// only the ones the guard issued are accepted.
func FuzzTokens(f *testing.F) {
	g, _, _ := newGuard(f, Config{})
	access, _, err := g.Issue(Subject{Principal: "services/fuzz"}, ServiceToken, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	binding := []byte("binding")
	page, err := g.sealPage("inner", binding)
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{access, page, "", ".", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", page[:len(page)-1]} {
		f.Add(s)
	}
	// base64 decoding ignores the unused bits of a last character, so a
	// token may be accepted in another spelling of the same bytes: what is
	// checked is that nothing but what was signed or sealed gets through.
	signed := access[:strings.LastIndexByte(access, '.')]
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := g.parse(t.Context(), s, AccessToken); err == nil && (!strings.HasPrefix(s, signed+".") || c.Subject != "services/fuzz") {
			t.Fatalf("accepted a token the guard did not issue: %q", s)
		}
		if inner, err := g.openPage(s, binding); err == nil && inner != "inner" {
			t.Fatalf("opened a page token the guard did not seal: %q → %q", s, inner)
		}
	})
}
