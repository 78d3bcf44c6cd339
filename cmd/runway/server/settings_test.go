package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
)

// TestLoginBannerWithoutToken: the banner is served to a caller with no
// token (the sign-in page), and nothing else of the settings is; an
// account-wide editor, who may edit policies, may not change the settings.
func TestLoginBannerWithoutToken(t *testing.T) {
	tn := startTenancy(t)
	if _, err := quotav1.NewQuotaServiceClient(tn.admin).UpdateSettings(t.Context(), &quotav1.UpdateSettingsRequest{
		Settings: &quotav1.Settings{Name: "settings", LoginBanner: "Authorised use only."}}); err != nil {
		t.Fatal(err)
	}
	anon, err := grpc.NewClient("passthrough:///"+tn.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = anon.Close() })
	q := quotav1.NewQuotaServiceClient(anon)
	b, err := q.GetLoginBanner(t.Context(), &quotav1.GetLoginBannerRequest{})
	if err != nil || b.GetText() != "Authorised use only." {
		t.Fatalf("GetLoginBanner without a token = %v, %v", b, err)
	}
	if _, err := q.GetSettings(t.Context(), &quotav1.GetSettingsRequest{Name: "settings"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("GetSettings without a token: %v, want Unauthenticated", err)
	}
	// The sign-in page's call: REST, no token.
	for path, want := range map[string]int{"/v1/settings/loginBanner": http.StatusOK, "/v1/settings": http.StatusUnauthorized} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+tn.addr+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != want || (want == http.StatusOK && !strings.Contains(string(body), "Authorised use only.")) ||
			(want != http.StatusOK && strings.Contains(string(body), "Authorised")) {
			t.Errorf("GET %s without a token: %d %s, want %d", path, resp.StatusCode, body, want)
		}
	}
	editor := tn.conn(t, tn.member(t, "ed", "roles/editor", &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_ACCOUNT}))
	_, err = quotav1.NewQuotaServiceClient(editor).UpdateSettings(t.Context(), &quotav1.UpdateSettingsRequest{
		Settings: &quotav1.Settings{Name: "settings", LoginBanner: "Editor was here."}})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an editor's UpdateSettings: %v, want PermissionDenied", err)
	}
	if b, _ := q.GetLoginBanner(t.Context(), &quotav1.GetLoginBannerRequest{}); b.GetText() != "Authorised use only." {
		t.Fatalf("banner after the refused change: %q", b.GetText())
	}
}
