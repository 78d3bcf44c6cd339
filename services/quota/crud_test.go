package quota_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
)

// ignoreOutput leaves out what the server assigns (uid, times, etag), for
// comparing a resource with what was sent.
var ignoreOutput = protocmp.IgnoreFields(&quotav1.Project{}, "uid", "create_time", "update_time", "etag")

func TestBuiltIns(t *testing.T) {
	e := newEnv(t)
	s := e.state(t)
	wantNames(t, s.Pools, "nodepools/default")
	wantNames(t, s.Departments, "departments/default")
	if len(s.Projects) != 0 {
		t.Fatalf("projects = %v, want none", names(s.Projects))
	}
	if s.Settings.GetRejectOverSubscription() {
		t.Fatal("reject_over_subscription is on by default, want off")
	}
	for _, m := range []interface {
		GetUid() string
		GetEtag() string
	}{s.Pools[0], s.Departments[0], s.Settings} {
		if m.GetUid() == "" || m.GetEtag() == "" {
			t.Fatalf("built-in %v has no uid or etag", m)
		}
	}
	if got := s.Pools[0].GetPlacementStrategy(); got != quotav1.PlacementStrategy_PLACEMENT_STRATEGY_BINPACK {
		t.Fatalf("default pool placement = %v, want BINPACK", got)
	}
}

func TestNodePool_CRUD(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	created := e.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"})
	want := &quotav1.NodePool{
		Name:              "nodepools/dgx",
		NodeSelector:      map[string]string{"run.ai/type": "dgx"},
		PlacementStrategy: quotav1.PlacementStrategy_PLACEMENT_STRATEGY_BINPACK,
		TimeSlicing: &quotav1.TimeSlicing{Mode: quotav1.TimeSlicingMode_TIME_SLICING_MODE_OFF,
			LeaseDuration: durationpb.New(250 * time.Millisecond), PrecisionPercent: 5},
	}
	ignore := protocmp.IgnoreFields(&quotav1.NodePool{}, "uid", "create_time", "update_time", "etag")
	if diff := cmp.Diff(want, created, protocmp.Transform(), ignore); diff != "" {
		t.Fatalf("created (-want +got):\n%s", diff)
	}
	if created.GetUid() == "" || created.GetEtag() == "" || !created.GetCreateTime().AsTime().Equal(created.GetUpdateTime().AsTime()) {
		t.Fatalf("created = %v, want a uid, an etag and update_time = create_time", created)
	}
	got, err := e.client.GetNodePool(ctx, &quotav1.GetNodePoolRequest{Name: "nodepools/dgx"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created, got, protocmp.Transform()); diff != "" {
		t.Fatalf("get (-created +got):\n%s", diff)
	}

	updated, err := e.client.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{
		NodePool: &quotav1.NodePool{Name: "nodepools/dgx", Etag: got.GetEtag(),
			PlacementStrategy: quotav1.PlacementStrategy_PLACEMENT_STRATEGY_SPREAD,
			TimeSlicing:       &quotav1.TimeSlicing{Mode: quotav1.TimeSlicingMode_TIME_SLICING_MODE_FAIR}},
		UpdateMask: mask("placement_strategy", "time_slicing.mode"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want.PlacementStrategy = quotav1.PlacementStrategy_PLACEMENT_STRATEGY_SPREAD
	want.TimeSlicing.Mode = quotav1.TimeSlicingMode_TIME_SLICING_MODE_FAIR
	if diff := cmp.Diff(want, updated, protocmp.Transform(), ignore); diff != "" {
		t.Fatalf("updated (-want +got):\n%s", diff)
	}
	if updated.GetEtag() == got.GetEtag() || !updated.GetUpdateTime().AsTime().After(got.GetUpdateTime().AsTime()) ||
		updated.GetUid() != got.GetUid() || !proto.Equal(updated.GetCreateTime(), got.GetCreateTime()) {
		t.Fatalf("after an update: etag %s → %s, update_time %v → %v; want a new etag, a later update_time, the same uid and create_time",
			got.GetEtag(), updated.GetEtag(), got.GetUpdateTime().AsTime(), updated.GetUpdateTime().AsTime())
	}

	// An update that changes nothing writes nothing: same etag.
	same, err := e.client.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{
		NodePool: &quotav1.NodePool{Name: "nodepools/dgx", PlacementStrategy: quotav1.PlacementStrategy_PLACEMENT_STRATEGY_SPREAD}})
	if err != nil {
		t.Fatal(err)
	}
	if same.GetEtag() != updated.GetEtag() {
		t.Fatalf("a no-op update changed the etag %s → %s", updated.GetEtag(), same.GetEtag())
	}

	// Naming a field in the mask without a value resets it to its default.
	reset, err := e.client.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{
		NodePool: &quotav1.NodePool{Name: "nodepools/dgx"}, UpdateMask: mask("time_slicing")})
	if err != nil {
		t.Fatal(err)
	}
	if got := reset.GetTimeSlicing().GetMode(); got != quotav1.TimeSlicingMode_TIME_SLICING_MODE_OFF {
		t.Fatalf("time_slicing.mode after a reset = %v, want OFF", got)
	}

	list, err := e.client.ListNodePools(ctx, &quotav1.ListNodePoolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantNames(t, list.GetNodePools(), "nodepools/default", "nodepools/dgx")

	if _, err := e.client.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/dgx", Etag: reset.GetEtag()}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetNodePool(ctx, &quotav1.GetNodePoolRequest{Name: "nodepools/dgx"})
	wantCode(t, err, codes.NotFound, "NODE_POOL_NOT_FOUND")
}

func TestDepartment_CRUD(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"})
	created, err := e.client.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{
		DepartmentId: "research",
		Department: &quotav1.Department{Description: "Research", NodePoolQuotas: []*quotav1.NodePoolQuota{
			gpus("default", 6),
			{NodePool: "nodepools/dgx", Cpu: &quotav1.CpuQuota{DeservedMilliCpu: i64(64000), OverQuotaEnabled: yes(false)}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every quota field is returned set: the documented defaults fill the gaps.
	wantQuotas := []*quotav1.NodePoolQuota{
		{
			NodePool: "nodepools/default",
			Gpu:      &quotav1.GpuQuota{DeservedMilliGpus: i64(6000), LimitMilliGpus: i64(-1), OverQuotaWeight: i32(1), OverQuotaEnabled: yes(true)},
			Cpu:      &quotav1.CpuQuota{DeservedMilliCpu: i64(-1), LimitMilliCpu: i64(-1), OverQuotaWeight: i32(1), OverQuotaEnabled: yes(true)},
			Memory:   &quotav1.MemoryQuota{DeservedMemoryBytes: i64(-1), LimitMemoryBytes: i64(-1), OverQuotaWeight: i32(1), OverQuotaEnabled: yes(true)},
		},
		{
			NodePool: "nodepools/dgx",
			Gpu:      &quotav1.GpuQuota{DeservedMilliGpus: i64(0), LimitMilliGpus: i64(-1), OverQuotaWeight: i32(1), OverQuotaEnabled: yes(true)},
			Cpu:      &quotav1.CpuQuota{DeservedMilliCpu: i64(64000), LimitMilliCpu: i64(-1), OverQuotaWeight: i32(1), OverQuotaEnabled: yes(false)},
			Memory:   &quotav1.MemoryQuota{DeservedMemoryBytes: i64(-1), LimitMemoryBytes: i64(-1), OverQuotaWeight: i32(1), OverQuotaEnabled: yes(true)},
		},
	}
	if diff := cmp.Diff(wantQuotas, created.GetNodePoolQuotas(), protocmp.Transform()); diff != "" {
		t.Fatalf("quotas (-want +got):\n%s", diff)
	}
	got, err := e.client.GetDepartment(ctx, &quotav1.GetDepartmentRequest{Name: "departments/research"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created, got, protocmp.Transform()); diff != "" {
		t.Fatalf("get (-created +got):\n%s", diff)
	}

	// A repeated field is replaced whole.
	updated, err := e.client.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{
		Department: &quotav1.Department{Name: "departments/research", Etag: got.GetEtag(), Description: "ignored: not in the mask",
			NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("default", 8)}},
		UpdateMask: mask("node_pool_quotas"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if updated.GetDescription() != "Research" || len(updated.GetNodePoolQuotas()) != 1 ||
		updated.GetNodePoolQuotas()[0].GetGpu().GetDeservedMilliGpus() != 8000 {
		t.Fatalf("updated = %v, want the description kept and one quota of 8 GPUs", updated)
	}

	list, err := e.client.ListDepartments(ctx, &quotav1.ListDepartmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantNames(t, list.GetDepartments(), "departments/default", "departments/research")

	if _, err := e.client.DeleteDepartment(ctx, &quotav1.DeleteDepartmentRequest{Name: "departments/research"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetDepartment(ctx, &quotav1.GetDepartmentRequest{Name: "departments/research"})
	wantCode(t, err, codes.NotFound, "DEPARTMENT_NOT_FOUND")
}

func TestProject_CRUD(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.mustCreateDepartment(t, "research", gpus("default", 6))

	// No department, no default node pools: the defaults are stored.
	plain := e.mustCreateProject(t, "team-a", "")
	if plain.GetDepartment() != "departments/default" || !cmp.Equal(plain.GetDefaultNodePools(), []string{"nodepools/default"}) {
		t.Fatalf("team-a = %v, want department default and default node pools [nodepools/default]", plain)
	}

	created := e.mustCreateProject(t, "team-b", "departments/research", gpus("default", 2))
	want := &quotav1.Project{
		Name: "projects/team-b", Department: "departments/research", DefaultNodePools: []string{"nodepools/default"},
		NodePoolQuotas: []*quotav1.NodePoolQuota{{
			NodePool: "nodepools/default",
			Gpu:      &quotav1.GpuQuota{DeservedMilliGpus: i64(2000), LimitMilliGpus: i64(-1), OverQuotaWeight: i32(1), OverQuotaEnabled: yes(true)},
			Cpu:      &quotav1.CpuQuota{DeservedMilliCpu: i64(-1), LimitMilliCpu: i64(-1), OverQuotaWeight: i32(1), OverQuotaEnabled: yes(true)},
			Memory:   &quotav1.MemoryQuota{DeservedMemoryBytes: i64(-1), LimitMemoryBytes: i64(-1), OverQuotaWeight: i32(1), OverQuotaEnabled: yes(true)},
		}},
	}
	if diff := cmp.Diff(want, created, protocmp.Transform(), ignoreOutput); diff != "" {
		t.Fatalf("created (-want +got):\n%s", diff)
	}
	got, err := e.client.GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/team-b"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created, got, protocmp.Transform()); diff != "" {
		t.Fatalf("get (-created +got):\n%s", diff)
	}

	// An empty mask updates the fields set to non-default values.
	updated, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
		Project: &quotav1.Project{Name: "projects/team-b", Etag: got.GetEtag(), Description: "Vision", Department: "departments/default"}})
	if err != nil {
		t.Fatal(err)
	}
	want.Description, want.Department = "Vision", "departments/default"
	if diff := cmp.Diff(want, updated, protocmp.Transform(), ignoreOutput); diff != "" {
		t.Fatalf("updated (-want +got):\n%s", diff)
	}

	// A named field sent empty goes back to its default.
	reset, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
		Project: &quotav1.Project{Name: "projects/team-b"}, UpdateMask: mask("node_pool_quotas", "description")})
	if err != nil {
		t.Fatal(err)
	}
	if reset.GetDescription() != "" || len(reset.GetNodePoolQuotas()) != 0 {
		t.Fatalf("reset = %v, want no description and no quotas", reset)
	}

	list, err := e.client.ListProjects(ctx, &quotav1.ListProjectsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	wantNames(t, list.GetProjects(), "projects/team-a", "projects/team-b")

	if _, err := e.client.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: "projects/team-b", Etag: reset.GetEtag()}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/team-b"})
	wantCode(t, err, codes.NotFound, "PROJECT_NOT_FOUND")
}

func TestSettings_GetUpdate(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	got, err := e.client.GetSettings(ctx, &quotav1.GetSettingsRequest{Name: "settings"})
	if err != nil {
		t.Fatal(err)
	}
	on, err := e.client.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{
		Settings: &quotav1.Settings{Name: "settings", Etag: got.GetEtag(), RejectOverSubscription: true}})
	if err != nil {
		t.Fatal(err)
	}
	if !on.GetRejectOverSubscription() || on.GetUid() != got.GetUid() || on.GetEtag() == got.GetEtag() {
		t.Fatalf("after turning it on: %v", on)
	}
	// An empty mask only sees non-default values: false needs the path.
	still, err := e.client.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings"}})
	if err != nil {
		t.Fatal(err)
	}
	if !still.GetRejectOverSubscription() {
		t.Fatal("an empty mask with false turned the setting off")
	}
	off, err := e.client.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{
		Settings: &quotav1.Settings{Name: "settings"}, UpdateMask: mask("reject_over_subscription")})
	if err != nil {
		t.Fatal(err)
	}
	if off.GetRejectOverSubscription() {
		t.Fatal("reject_over_subscription still on after an update naming it")
	}
}

func TestListProjects_pages(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.mustCreateDepartment(t, "research")
	for _, id := range []string{"p1", "p2", "p3", "p4", "p5"} {
		dept := ""
		if id == "p2" || id == "p5" {
			dept = "departments/research"
		}
		e.mustCreateProject(t, id, dept)
	}
	var pages [][]string
	token := ""
	for {
		resp, err := e.client.ListProjects(ctx, &quotav1.ListProjectsRequest{PageSize: 2, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, names(resp.GetProjects()))
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
		// A project created between pages is not seen: the pages are one snapshot.
		if len(pages) == 1 {
			e.mustCreateProject(t, "p0", "")
		}
	}
	want := [][]string{{"projects/p1", "projects/p2"}, {"projects/p3", "projects/p4"}, {"projects/p5"}}
	if diff := cmp.Diff(want, pages); diff != "" {
		t.Fatalf("pages (-want +got):\n%s", diff)
	}

	filtered, err := e.client.ListProjects(ctx, &quotav1.ListProjectsRequest{Filter: `department = "departments/research"`})
	if err != nil {
		t.Fatal(err)
	}
	wantNames(t, filtered.GetProjects(), "projects/p2", "projects/p5")

	_, err = e.client.ListProjects(ctx, &quotav1.ListProjectsRequest{PageToken: "bm90IGEgdG9rZW4"})
	wantCode(t, err, codes.InvalidArgument, "INVALID_PAGE_TOKEN")
}

// A pool's tolerations are stored and read back, replaced by an update
// that names them, and cleared by one that names them empty.
func TestNodePool_Tolerations(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ts := []*quotav1.Toleration{{Key: "dedicated", Value: "ml", Effect: quotav1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE},
		{Key: "nvidia.com/gpu", Operator: quotav1.TolerationOperator_TOLERATION_OPERATOR_EXISTS}}
	if _, err := e.client.CreateNodePool(ctx, &quotav1.CreateNodePoolRequest{NodePoolId: "ml",
		NodePool: &quotav1.NodePool{NodeSelector: map[string]string{"pool": "ml"}, Tolerations: ts}}); err != nil {
		t.Fatal(err)
	}
	get := func() []*quotav1.Toleration {
		t.Helper()
		got, err := e.client.GetNodePool(ctx, &quotav1.GetNodePoolRequest{Name: "nodepools/ml"})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetTolerations()
	}
	if diff := cmp.Diff(ts, get(), protocmp.Transform()); diff != "" {
		t.Fatalf("tolerations as stored (-want +got):\n%s", diff)
	}
	// An update of another field leaves them; one naming them replaces them.
	if _, err := e.client.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{Name: "nodepools/ml",
		Description: "x"}, UpdateMask: mask("description")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ts, get(), protocmp.Transform()); diff != "" {
		t.Fatalf("tolerations after updating the description (-want +got):\n%s", diff)
	}
	if _, err := e.client.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{Name: "nodepools/ml",
		Tolerations: ts[1:]}, UpdateMask: mask("tolerations")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ts[1:], get(), protocmp.Transform()); diff != "" {
		t.Fatalf("tolerations after replacing them (-want +got):\n%s", diff)
	}
	if _, err := e.client.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{Name: "nodepools/ml"},
		UpdateMask: mask("tolerations")}); err != nil {
		t.Fatal(err)
	}
	if got := get(); len(got) != 0 {
		t.Fatalf("tolerations after clearing them: %v", got)
	}
}

// Time-based fair share is off by default; setting the half-life turns it
// on (k defaults to 1), k changes alone, and naming it empty turns it off.
func TestNodePool_TimeBasedFairShare(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if created := e.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"}); created.GetTimeBasedFairShare() != nil {
		t.Fatalf("a new pool has time_based_fair_share %v, want unset (off)", created.GetTimeBasedFairShare())
	}
	update := func(np *quotav1.NodePool, paths ...string) *quotav1.NodePool {
		t.Helper()
		np.Name = "nodepools/dgx"
		got, err := e.client.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{NodePool: np, UpdateMask: mask(paths...)})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	on := update(&quotav1.NodePool{TimeBasedFairShare: &quotav1.TimeBasedFairShare{HalfLife: durationpb.New(time.Hour)}},
		"time_based_fair_share.half_life")
	want := &quotav1.TimeBasedFairShare{HalfLife: durationpb.New(time.Hour), K: f64(1)}
	if diff := cmp.Diff(want, on.GetTimeBasedFairShare(), protocmp.Transform()); diff != "" {
		t.Fatalf("time_based_fair_share after setting the half-life (-want +got):\n%s", diff)
	}
	k := update(&quotav1.NodePool{TimeBasedFairShare: &quotav1.TimeBasedFairShare{K: f64(0.5)}}, "time_based_fair_share.k")
	want.K = f64(0.5)
	if diff := cmp.Diff(want, k.GetTimeBasedFairShare(), protocmp.Transform()); diff != "" {
		t.Fatalf("time_based_fair_share after setting k alone (-want +got):\n%s", diff)
	}
	if off := update(&quotav1.NodePool{}, "time_based_fair_share"); off.GetTimeBasedFairShare() != nil {
		t.Fatalf("time_based_fair_share after a reset = %v, want unset (off)", off.GetTimeBasedFairShare())
	}
}
