package quota_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// TestInvalidInput sends bad input to every Create, Update, Get, List and
// Delete: each is INVALID_ARGUMENT with a BadRequest naming the field by its
// AIP path, and leaves the stored state as it was.
func TestInvalidInput(t *testing.T) {
	e := newEnv(t)
	e.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"})
	e.mustCreateDepartment(t, "research", gpus("default", 4))
	e.mustCreateProject(t, "team-a", "departments/research", gpus("default", 1))
	c := e.client

	project := func(p *quotav1.Project) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "team-x", Project: p})
			return err
		}
	}
	updateProject := func(p *quotav1.Project, paths ...string) func(context.Context) error {
		return func(ctx context.Context) error {
			p.Name = "projects/team-a"
			_, err := c.UpdateProject(ctx, &quotav1.UpdateProjectRequest{Project: p, UpdateMask: mask(paths...)})
			return err
		}
	}
	department := func(d *quotav1.Department) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: "ops", Department: d})
			return err
		}
	}
	updateDepartment := func(d *quotav1.Department, paths ...string) func(context.Context) error {
		return func(ctx context.Context) error {
			d.Name = "departments/research"
			_, err := c.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{Department: d, UpdateMask: mask(paths...)})
			return err
		}
	}
	pool := func(np *quotav1.NodePool) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := c.CreateNodePool(ctx, &quotav1.CreateNodePoolRequest{NodePoolId: "a100", NodePool: np})
			return err
		}
	}
	updatePool := func(name string, np *quotav1.NodePool, paths ...string) func(context.Context) error {
		return func(ctx context.Context) error {
			np.Name = name
			_, err := c.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{NodePool: np, UpdateMask: mask(paths...)})
			return err
		}
	}
	dgx := map[string]string{"run.ai/type": "dgx"}
	gpuQuota := func(g *quotav1.GpuQuota) []*quotav1.NodePoolQuota {
		return []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: g}}
	}

	for _, tc := range []struct {
		name       string
		request    func(context.Context) error
		wantReason string // INVALID_FIELD unless set
		wantField  string
	}{
		// Projects.
		{"a project id with a capital letter", func(ctx context.Context) error {
			_, err := c.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "Team-x", Project: &quotav1.Project{}})
			return err
		}, "", "project_id"},
		{"a project id that starts with a digit", func(ctx context.Context) error {
			_, err := c.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "1team", Project: &quotav1.Project{}})
			return err
		}, "", "project_id"},
		{"a project id of 64 characters", func(ctx context.Context) error {
			_, err := c.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "a" + strings.Repeat("b", 63), Project: &quotav1.Project{}})
			return err
		}, "", "project_id"},
		{"a project create without a project", func(ctx context.Context) error {
			_, err := c.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "team-x"})
			return err
		}, "", "project"},
		{"a project description of 1025 characters", project(&quotav1.Project{Description: strings.Repeat("x", 1025)}), "", "project.description"},
		{"a project department that is not a department name", project(&quotav1.Project{Department: "research"}), "", "project.department"},
		{"a negative deserved GPU quota", project(&quotav1.Project{NodePoolQuotas: gpuQuota(&quotav1.GpuQuota{DeservedMilliGpus: i64(-2000)})}),
			"", "project.node_pool_quotas[0].gpu.deserved_milli_gpus"},
		{"a GPU limit below the deserved quota", project(&quotav1.Project{NodePoolQuotas: gpuQuota(&quotav1.GpuQuota{DeservedMilliGpus: i64(2000), LimitMilliGpus: i64(1000)})}),
			"", "project.node_pool_quotas[0].gpu.limit_milli_gpus"},
		{"a negative GPU over-quota weight", project(&quotav1.Project{NodePoolQuotas: gpuQuota(&quotav1.GpuQuota{OverQuotaWeight: i32(-1)})}),
			"", "project.node_pool_quotas[0].gpu.over_quota_weight"},
		{"a CPU limit of -5", project(&quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Cpu: &quotav1.CpuQuota{LimitMilliCpu: i64(-5)}}}}),
			"", "project.node_pool_quotas[0].cpu.limit_milli_cpu"},
		{"a memory deserved quota of -2", project(&quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Memory: &quotav1.MemoryQuota{DeservedMemoryBytes: i64(-2)}}}}),
			"", "project.node_pool_quotas[0].memory.deserved_memory_bytes"},
		{"a quota without its node pool", project(&quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{Gpu: &quotav1.GpuQuota{}}}}),
			"", "project.node_pool_quotas[0].node_pool"},
		{"two quotas for one node pool", project(&quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("default", 1), gpus("default", 2)}}),
			"", "project.node_pool_quotas[1].node_pool"},
		{"a default node pool that is not a node pool name", project(&quotav1.Project{DefaultNodePools: []string{"dgx"}}),
			"", "project.default_node_pools[0]"},
		{"a default node pool listed twice", project(&quotav1.Project{DefaultNodePools: []string{"nodepools/dgx", "nodepools/dgx"}}),
			"", "project.default_node_pools[1]"},
		{"a project update without a project", func(ctx context.Context) error {
			_, err := c.UpdateProject(ctx, &quotav1.UpdateProjectRequest{})
			return err
		}, "", "project"},
		{"a project update of a malformed name", func(ctx context.Context) error {
			_, err := c.UpdateProject(ctx, &quotav1.UpdateProjectRequest{Project: &quotav1.Project{Name: "team-a"}})
			return err
		}, "", "project.name"},
		{"a project update to a negative deserved GPU quota", updateProject(&quotav1.Project{NodePoolQuotas: gpuQuota(&quotav1.GpuQuota{DeservedMilliGpus: i64(-3)})}),
			"", "project.node_pool_quotas[0].gpu.deserved_milli_gpus"},
		{"a project update to a malformed department", updateProject(&quotav1.Project{Department: "departments/Research"}), "", "project.department"},
		{"a project update mask naming an unknown field", updateProject(&quotav1.Project{}, "owner"), "IMMUTABLE_FIELD", "update_mask"},
		{"a project update mask naming uid with another value", updateProject(&quotav1.Project{Uid: "f00"}, "uid"), "IMMUTABLE_FIELD", "update_mask"},
		{"a project update mask naming create_time with another value",
			updateProject(&quotav1.Project{CreateTime: timestamppb.New(time.Unix(1, 0))}, "create_time"), "IMMUTABLE_FIELD", "update_mask"},
		{"a project get of a malformed name", func(ctx context.Context) error {
			_, err := c.GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/"})
			return err
		}, "", "name"},
		{"a project delete of a workload name", func(ctx context.Context) error {
			_, err := c.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: "projects/team-a/workloads/w"})
			return err
		}, "", "name"},
		{"a negative page size", func(ctx context.Context) error {
			_, err := c.ListProjects(ctx, &quotav1.ListProjectsRequest{PageSize: -1})
			return err
		}, "", "page_size"},
		{"a page token this server never issued", func(ctx context.Context) error {
			_, err := c.ListDepartments(ctx, &quotav1.ListDepartmentsRequest{PageToken: "x"})
			return err
		}, "INVALID_PAGE_TOKEN", "page_token"},
		{"a filter on an unsupported field", func(ctx context.Context) error {
			_, err := c.ListProjects(ctx, &quotav1.ListProjectsRequest{Filter: `owner = "bob"`})
			return err
		}, "INVALID_FILTER", "filter"},

		// Departments.
		{"a department id with an underscore", func(ctx context.Context) error {
			_, err := c.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: "r_and_d", Department: &quotav1.Department{}})
			return err
		}, "", "department_id"},
		{"a department create without a department", func(ctx context.Context) error {
			_, err := c.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: "ops"})
			return err
		}, "", "department"},
		{"a department description of 2000 characters", department(&quotav1.Department{Description: strings.Repeat("é", 2000)}), "", "department.description"},
		{"a department quota with a malformed node pool", department(&quotav1.Department{NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/DGX"}}}),
			"", "department.node_pool_quotas[0].node_pool"},
		{"a department CPU limit below its deserved CPU", department(&quotav1.Department{NodePoolQuotas: []*quotav1.NodePoolQuota{
			{NodePool: "nodepools/default", Cpu: &quotav1.CpuQuota{DeservedMilliCpu: i64(4000), LimitMilliCpu: i64(2000)}}}}),
			"", "department.node_pool_quotas[0].cpu.limit_milli_cpu"},
		{"a department update of a malformed name", func(ctx context.Context) error {
			_, err := c.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{Department: &quotav1.Department{Name: "departments/a/b"}})
			return err
		}, "", "department.name"},
		{"a department update to a negative memory weight", updateDepartment(&quotav1.Department{NodePoolQuotas: []*quotav1.NodePoolQuota{
			{NodePool: "nodepools/default", Memory: &quotav1.MemoryQuota{OverQuotaWeight: i32(-4)}}}}),
			"", "department.node_pool_quotas[0].memory.over_quota_weight"},
		{"a department update mask naming update_time with another value",
			updateDepartment(&quotav1.Department{}, "update_time"), "IMMUTABLE_FIELD", "update_mask"},
		{"a department get without a name", func(ctx context.Context) error {
			_, err := c.GetDepartment(ctx, &quotav1.GetDepartmentRequest{})
			return err
		}, "", "name"},

		// Node pools.
		{"a node pool id with a dot", func(ctx context.Context) error {
			_, err := c.CreateNodePool(ctx, &quotav1.CreateNodePoolRequest{NodePoolId: "a.100", NodePool: &quotav1.NodePool{NodeSelector: dgx}})
			return err
		}, "", "node_pool_id"},
		{"a node pool create without a node pool", func(ctx context.Context) error {
			_, err := c.CreateNodePool(ctx, &quotav1.CreateNodePoolRequest{NodePoolId: "a100"})
			return err
		}, "", "node_pool"},
		{"a node pool without a selector", pool(&quotav1.NodePool{}), "", "node_pool.node_selector"},
		{"a node pool selector with an empty label key", pool(&quotav1.NodePool{NodeSelector: map[string]string{"": "x"}}), "", `node_pool.node_selector[""]`},
		{"an unknown placement strategy", pool(&quotav1.NodePool{NodeSelector: dgx, PlacementStrategy: 7}), "", "node_pool.placement_strategy"},
		{"a time-slicing lease of 5ms", pool(&quotav1.NodePool{NodeSelector: dgx, TimeSlicing: &quotav1.TimeSlicing{LeaseDuration: durationpb.New(5 * time.Millisecond)}}),
			"", "node_pool.time_slicing.lease_duration"},
		{"a time-slicing precision of 60 percent", pool(&quotav1.NodePool{NodeSelector: dgx, TimeSlicing: &quotav1.TimeSlicing{PrecisionPercent: 60}}),
			"", "node_pool.time_slicing.precision_percent"},
		{"a time-slicing precision of 3 percent (not whole leases)", pool(&quotav1.NodePool{NodeSelector: dgx, TimeSlicing: &quotav1.TimeSlicing{PrecisionPercent: 3}}),
			"", "node_pool.time_slicing.precision_percent"},
		{"an unknown time-slicing mode", pool(&quotav1.NodePool{NodeSelector: dgx, TimeSlicing: &quotav1.TimeSlicing{Mode: 9}}),
			"", "node_pool.time_slicing.mode"},
		{"time-based fair share without a half-life", pool(&quotav1.NodePool{NodeSelector: dgx, TimeBasedFairShare: &quotav1.TimeBasedFairShare{}}),
			"", "node_pool.time_based_fair_share.half_life"},
		{"a fair-share half-life of 10 seconds", pool(&quotav1.NodePool{NodeSelector: dgx,
			TimeBasedFairShare: &quotav1.TimeBasedFairShare{HalfLife: durationpb.New(10 * time.Second)}}),
			"", "node_pool.time_based_fair_share.half_life"},
		{"a fair-share half-life of two years", pool(&quotav1.NodePool{NodeSelector: dgx,
			TimeBasedFairShare: &quotav1.TimeBasedFairShare{HalfLife: durationpb.New(2 * 365 * 24 * time.Hour)}}),
			"", "node_pool.time_based_fair_share.half_life"},
		{"a negative fair-share k", pool(&quotav1.NodePool{NodeSelector: dgx,
			TimeBasedFairShare: &quotav1.TimeBasedFairShare{HalfLife: durationpb.New(time.Hour), K: f64(-0.5)}}),
			"", "node_pool.time_based_fair_share.k"},
		{"a fair-share k that is not a number", pool(&quotav1.NodePool{NodeSelector: dgx,
			TimeBasedFairShare: &quotav1.TimeBasedFairShare{HalfLife: durationpb.New(time.Hour), K: f64(math.NaN())}}),
			"", "node_pool.time_based_fair_share.k"},
		{"a toleration without a key", pool(&quotav1.NodePool{NodeSelector: dgx,
			Tolerations: []*quotav1.Toleration{{Key: "ok"}, {Value: "v"}}}), "", "node_pool.tolerations[1].key"},
		{"a toleration key that is no qualified name", pool(&quotav1.NodePool{NodeSelector: dgx,
			Tolerations: []*quotav1.Toleration{{Key: "a b"}}}), "", "node_pool.tolerations[0].key"},
		{"a toleration value that is no label value", pool(&quotav1.NodePool{NodeSelector: dgx,
			Tolerations: []*quotav1.Toleration{{Key: "k", Value: strings.Repeat("v", 64)}}}), "", "node_pool.tolerations[0].value"},
		{"a toleration EXISTS with a value", pool(&quotav1.NodePool{NodeSelector: dgx,
			Tolerations: []*quotav1.Toleration{{Key: "k", Value: "v", Operator: quotav1.TolerationOperator_TOLERATION_OPERATOR_EXISTS}}}),
			"", "node_pool.tolerations[0].value"},
		{"an unknown toleration effect", pool(&quotav1.NodePool{NodeSelector: dgx,
			Tolerations: []*quotav1.Toleration{{Key: "k", Effect: 7}}}), "", "node_pool.tolerations[0].effect"},
		{"33 tolerations", pool(&quotav1.NodePool{NodeSelector: dgx,
			Tolerations: slices.Repeat([]*quotav1.Toleration{{Key: "k"}}, 33)}), "", "node_pool.tolerations"},
		{"a fair-share k above 10", updatePool("nodepools/dgx",
			&quotav1.NodePool{TimeBasedFairShare: &quotav1.TimeBasedFairShare{HalfLife: durationpb.New(time.Hour), K: f64(11)}}),
			"", "node_pool.time_based_fair_share.k"},
		{"a fair-share k without a half-life on a pool without it", updatePool("nodepools/dgx",
			&quotav1.NodePool{TimeBasedFairShare: &quotav1.TimeBasedFairShare{K: f64(0.5)}}, "time_based_fair_share.k"),
			"", "node_pool.time_based_fair_share.half_life"},
		{"a selector on the built-in default node pool", updatePool("nodepools/default", &quotav1.NodePool{NodeSelector: dgx}),
			"", "node_pool.node_selector"},
		{"a node pool update that removes the selector", updatePool("nodepools/dgx", &quotav1.NodePool{}, "node_selector"),
			"", "node_pool.node_selector"},
		{"a node pool update of a malformed name", updatePool("nodepool/dgx", &quotav1.NodePool{}), "", "node_pool.name"},
		{"a node pool update mask naming a sub-field of a duration", updatePool("nodepools/dgx", &quotav1.NodePool{}, "time_slicing.lease_duration.seconds"),
			"IMMUTABLE_FIELD", "update_mask"},
		{"a node pool delete of a malformed name", func(ctx context.Context) error {
			_, err := c.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/-x"})
			return err
		}, "", "name"},

		// Settings.
		{"a settings get of another name", func(ctx context.Context) error {
			_, err := c.GetSettings(ctx, &quotav1.GetSettingsRequest{Name: "settings/1"})
			return err
		}, "", "name"},
		{"a settings update of another name", func(ctx context.Context) error {
			_, err := c.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "setting", RejectOverSubscription: true}})
			return err
		}, "", "settings.name"},
		{"a settings update without settings", func(ctx context.Context) error {
			_, err := c.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{})
			return err
		}, "", "settings"},
		{"a settings update mask naming uid with another value", func(ctx context.Context) error {
			_, err := c.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings", Uid: "x"}, UpdateMask: mask("uid")})
			return err
		}, "IMMUTABLE_FIELD", "update_mask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.unchangedBy(t, func() error { return tc.request(t.Context()) })
			wantReason := tc.wantReason
			if wantReason == "" {
				wantReason = "INVALID_FIELD"
			}
			wantCode(t, err, codes.InvalidArgument, wantReason)
			if fields := violationFields(err); !slices.Contains(fields, tc.wantField) {
				t.Fatalf("field violations %q, want one on %q (%v)", fields, tc.wantField, status.Convert(err).Message())
			}
			if wantReason == "INVALID_FIELD" && !strings.Contains(metadata(err)["field"], tc.wantField) {
				t.Fatalf("metadata field = %q, want it to name %q", metadata(err)["field"], tc.wantField)
			}
			if wantReason == "IMMUTABLE_FIELD" && apierr.Info(err).GetMetadata()["field"] == "" {
				t.Fatal("IMMUTABLE_FIELD without the field in its metadata")
			}
		})
	}
}

// TestInvalidInput_everyField: one request with several bad fields names
// all of them, not only the first.
func TestInvalidInput_everyField(t *testing.T) {
	e := newEnv(t)
	err := e.unchangedBy(t, func() error {
		_, err := e.client.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: "Team", Project: &quotav1.Project{
			Department:     "research",
			NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: i64(-7)}}},
		}})
		return err
	})
	wantCode(t, err, codes.InvalidArgument, "INVALID_FIELD")
	want := []string{"project_id", "project.department", "project.node_pool_quotas[0].gpu.deserved_milli_gpus"}
	if got := violationFields(err); !slices.Equal(got, want) {
		t.Fatalf("field violations %q, want %q", got, want)
	}
}
