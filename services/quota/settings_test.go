package quota_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
)

// TestSettings_Defaults: a fresh account reads every option's effective
// value, and the banner is served on its own.
func TestSettings_Defaults(t *testing.T) {
	e := newEnv(t)
	st, err := e.client.GetSettings(t.Context(), &quotav1.GetSettingsRequest{Name: "settings"})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetDefaultNodePool() != "nodepools/default" || !st.GetGpuResourceOptimization() ||
		st.GetAllowOverQuotaByDefault() || st.GetWorkspaceAutoSuspend() != nil || st.GetLoginBanner() != "" {
		t.Fatalf("defaults: %v", st)
	}
	b, err := e.client.GetLoginBanner(t.Context(), &quotav1.GetLoginBannerRequest{})
	if err != nil || b.GetText() != "" {
		t.Fatalf("GetLoginBanner = %v, %v; want empty", b, err)
	}
}

// TestSettings_UpdateEachOption sets every option through the mask, reads
// it back, then resets them by naming them with no value.
func TestSettings_UpdateEachOption(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.mustCreatePool(t, "a100", map[string]string{"gpu": "a100"})
	banner := "Authorised use only.\nMonitored."
	got, err := e.client.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{
		Settings: &quotav1.Settings{Name: "settings", DefaultNodePool: "nodepools/a100", AllowOverQuotaByDefault: true,
			WorkspaceAutoSuspend: durationpb.New(8 * time.Hour), GpuResourceOptimization: proto.Bool(false), LoginBanner: banner},
		UpdateMask: mask("default_node_pool", "allow_over_quota_by_default", "workspace_auto_suspend", "gpu_resource_optimization", "login_banner")})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetDefaultNodePool() != "nodepools/a100" || !got.GetAllowOverQuotaByDefault() ||
		got.GetWorkspaceAutoSuspend().AsDuration() != 8*time.Hour || got.GetGpuResourceOptimization() || got.GetLoginBanner() != banner {
		t.Fatalf("after update: %v", got)
	}
	b, err := e.client.GetLoginBanner(ctx, &quotav1.GetLoginBannerRequest{})
	if err != nil || b.GetText() != banner {
		t.Fatalf("GetLoginBanner = %v, %v", b, err)
	}
	// An empty mask changes only what is set: the banner alone.
	got, err = e.client.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings", LoginBanner: "Hello"}})
	if err != nil || got.GetLoginBanner() != "Hello" || got.GetDefaultNodePool() != "nodepools/a100" || got.GetGpuResourceOptimization() {
		t.Fatalf("empty mask: %v, %v", got, err)
	}
	got, err = e.client.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings"},
		UpdateMask: mask("default_node_pool", "allow_over_quota_by_default", "workspace_auto_suspend", "gpu_resource_optimization", "login_banner")})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetDefaultNodePool() != "nodepools/default" || got.GetAllowOverQuotaByDefault() || got.GetWorkspaceAutoSuspend() != nil ||
		!got.GetGpuResourceOptimization() || got.GetLoginBanner() != "" {
		t.Fatalf("after reset: %v", got)
	}
}

// TestSettings_Invalid: every bad option is named at once, and nothing is
// written.
func TestSettings_Invalid(t *testing.T) {
	e := newEnv(t)
	err := e.unchangedBy(t, func() error {
		_, err := e.client.UpdateSettings(t.Context(), &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings",
			DefaultNodePool: "pools/x", WorkspaceAutoSuspend: durationpb.New(time.Second),
			LoginBanner: "bell\a"}})
		return err
	})
	wantCode(t, err, codes.InvalidArgument, "INVALID_FIELD")
	if got := strings.Join(violationFields(err), " "); got != "settings.default_node_pool settings.workspace_auto_suspend settings.login_banner" {
		t.Fatalf("fields = %s (%v)", got, err)
	}
	err = e.unchangedBy(t, func() error {
		_, err := e.client.UpdateSettings(t.Context(), &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings",
			LoginBanner: strings.Repeat("é", 1001), WorkspaceAutoSuspend: durationpb.New(366 * 24 * time.Hour)}})
		return err
	})
	wantCode(t, err, codes.InvalidArgument, "INVALID_FIELD")
	if got := strings.Join(violationFields(err), " "); got != "settings.workspace_auto_suspend settings.login_banner" {
		t.Fatalf("fields = %s (%v)", got, err)
	}
	// A pool that does not exist.
	err = e.unchangedBy(t, func() error {
		_, err := e.client.UpdateSettings(t.Context(), &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings",
			DefaultNodePool: "nodepools/nope"}})
		return err
	})
	wantCode(t, err, codes.NotFound, "NODE_POOL_NOT_FOUND")
	if got := violationFields(err); len(got) != 1 || got[0] != "settings.default_node_pool" {
		t.Fatalf("fields = %v", got)
	}
}

// TestSettings_DefaultNodePool: a project created with no default node
// pools gets the settings' pool (and keeps it when the setting changes);
// the pool cannot be deleted while the settings name it.
func TestSettings_DefaultNodePool(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.mustCreatePool(t, "a100", map[string]string{"gpu": "a100"})
	before := e.mustCreateProject(t, "before", "")
	if _, err := e.client.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{
		Settings: &quotav1.Settings{Name: "settings", DefaultNodePool: "nodepools/a100"}}); err != nil {
		t.Fatal(err)
	}
	after := e.mustCreateProject(t, "after", "")
	if got := after.GetDefaultNodePools(); len(got) != 1 || got[0] != "nodepools/a100" {
		t.Fatalf("new project's default pools = %v", got)
	}
	if got := before.GetDefaultNodePools(); len(got) != 1 || got[0] != "nodepools/default" {
		t.Fatalf("earlier project's default pools = %v", got)
	}
	// Resetting a project's pools gives it the settings' pool too.
	reset, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{Project: &quotav1.Project{Name: "projects/before"},
		UpdateMask: mask("default_node_pools")})
	if err != nil || len(reset.GetDefaultNodePools()) != 1 || reset.GetDefaultNodePools()[0] != "nodepools/a100" {
		t.Fatalf("reset pools: %v, %v", reset, err)
	}
	// Projects no longer name a100 once moved back; the settings still do.
	for _, p := range []string{"projects/before", "projects/after"} {
		if _, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{Project: &quotav1.Project{Name: p,
			DefaultNodePools: []string{"nodepools/default"}}}); err != nil {
			t.Fatal(err)
		}
	}
	err = e.unchangedBy(t, func() error {
		_, err := e.client.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/a100"})
		return err
	})
	wantCode(t, err, codes.FailedPrecondition, "NODE_POOL_IN_USE")
	if _, err := e.client.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{
		Settings: &quotav1.Settings{Name: "settings"}, UpdateMask: mask("default_node_pool")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/a100"}); err != nil {
		t.Fatalf("delete once unnamed: %v", err)
	}
}

// TestSettings_LoginBannerREST: the sign-in page's call, over the gateway.
func TestSettings_LoginBannerREST(t *testing.T) {
	e := newEnv(t)
	if _, err := e.client.UpdateSettings(t.Context(), &quotav1.UpdateSettingsRequest{
		Settings: &quotav1.Settings{Name: "settings", LoginBanner: "Be kind."}}); err != nil {
		t.Fatal(err)
	}
	code, body := e.rest(t, http.MethodGet, "/v1/settings/loginBanner", "")
	var b quotav1.LoginBanner
	decode(t, body, &b)
	if code != http.StatusOK || b.GetText() != "Be kind." {
		t.Fatalf("GET /v1/settings/loginBanner = %d %s", code, body)
	}
}
