package quota_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

func TestNotFound(t *testing.T) {
	e := newEnv(t)
	c := e.client
	e.mustCreateProject(t, "team-a", "")
	for _, tc := range []struct {
		name       string
		request    func(context.Context) error
		wantReason string
		wantKey    string // the metadata key naming the resource
		wantValue  string
	}{
		{"get a missing project", func(ctx context.Context) error {
			_, err := c.GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/nope"})
			return err
		}, "PROJECT_NOT_FOUND", "project", "projects/nope"},
		{"update a missing project", func(ctx context.Context) error {
			_, err := c.UpdateProject(ctx, &quotav1.UpdateProjectRequest{Project: &quotav1.Project{Name: "projects/nope", Description: "x"}})
			return err
		}, "PROJECT_NOT_FOUND", "project", "projects/nope"},
		{"delete a missing project", func(ctx context.Context) error {
			_, err := c.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: "projects/nope"})
			return err
		}, "PROJECT_NOT_FOUND", "project", "projects/nope"},
		{"get a missing department", func(ctx context.Context) error {
			_, err := c.GetDepartment(ctx, &quotav1.GetDepartmentRequest{Name: "departments/nope"})
			return err
		}, "DEPARTMENT_NOT_FOUND", "department", "departments/nope"},
		{"update a missing department", func(ctx context.Context) error {
			_, err := c.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{Department: &quotav1.Department{Name: "departments/nope"}})
			return err
		}, "DEPARTMENT_NOT_FOUND", "department", "departments/nope"},
		{"delete a missing department", func(ctx context.Context) error {
			_, err := c.DeleteDepartment(ctx, &quotav1.DeleteDepartmentRequest{Name: "departments/nope"})
			return err
		}, "DEPARTMENT_NOT_FOUND", "department", "departments/nope"},
		{"get a missing node pool", func(ctx context.Context) error {
			_, err := c.GetNodePool(ctx, &quotav1.GetNodePoolRequest{Name: "nodepools/nope"})
			return err
		}, "NODE_POOL_NOT_FOUND", "nodePool", "nodepools/nope"},
		{"update a missing node pool", func(ctx context.Context) error {
			_, err := c.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{Name: "nodepools/nope"}})
			return err
		}, "NODE_POOL_NOT_FOUND", "nodePool", "nodepools/nope"},
		{"delete a missing node pool", func(ctx context.Context) error {
			_, err := c.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/nope"})
			return err
		}, "NODE_POOL_NOT_FOUND", "nodePool", "nodepools/nope"},
		{"create a project in a missing department", func(ctx context.Context) error {
			_, err := c.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "p", Project: &quotav1.Project{Department: "departments/nope"}})
			return err
		}, "DEPARTMENT_NOT_FOUND", "department", "departments/nope"},
		{"move a project to a missing department", func(ctx context.Context) error {
			_, err := c.UpdateProject(ctx, &quotav1.UpdateProjectRequest{Project: &quotav1.Project{Name: "projects/team-a", Department: "departments/nope"}})
			return err
		}, "DEPARTMENT_NOT_FOUND", "department", "departments/nope"},
		{"create a project with a quota in a missing node pool", func(ctx context.Context) error {
			_, err := c.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "p", Project: &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("nope", 1)}}})
			return err
		}, "NODE_POOL_NOT_FOUND", "nodePool", "nodepools/nope"},
		{"create a project with a missing default node pool", func(ctx context.Context) error {
			_, err := c.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "p", Project: &quotav1.Project{DefaultNodePools: []string{"nodepools/nope"}}})
			return err
		}, "NODE_POOL_NOT_FOUND", "nodePool", "nodepools/nope"},
		{"create a department with a quota in a missing node pool", func(ctx context.Context) error {
			_, err := c.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: "d", Department: &quotav1.Department{NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("nope", 1)}}})
			return err
		}, "NODE_POOL_NOT_FOUND", "nodePool", "nodepools/nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.unchangedBy(t, func() error { return tc.request(t.Context()) })
			wantCode(t, err, codes.NotFound, tc.wantReason)
			if got := metadata(err)[tc.wantKey]; got != tc.wantValue {
				t.Fatalf("metadata %s = %q, want %q", tc.wantKey, got, tc.wantValue)
			}
		})
	}
}

func TestAlreadyExists(t *testing.T) {
	e := newEnv(t)
	c := e.client
	e.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"})
	e.mustCreateDepartment(t, "research")
	e.mustCreateProject(t, "team-a", "")
	for _, tc := range []struct {
		name       string
		request    func(context.Context) error
		wantReason string
	}{
		{"a project id that is taken", func(ctx context.Context) error {
			_, err := c.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "team-a", Project: &quotav1.Project{Description: "second"}})
			return err
		}, "PROJECT_ALREADY_EXISTS"},
		{"a department id that is taken", func(ctx context.Context) error {
			_, err := c.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: "research", Department: &quotav1.Department{}})
			return err
		}, "DEPARTMENT_ALREADY_EXISTS"},
		{"the built-in department's id", func(ctx context.Context) error {
			_, err := c.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: "default", Department: &quotav1.Department{}})
			return err
		}, "DEPARTMENT_ALREADY_EXISTS"},
		{"a node pool id that is taken", func(ctx context.Context) error {
			_, err := c.CreateNodePool(ctx, &quotav1.CreateNodePoolRequest{NodePoolId: "dgx", NodePool: &quotav1.NodePool{NodeSelector: map[string]string{"a": "b"}}})
			return err
		}, "NODE_POOL_ALREADY_EXISTS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.unchangedBy(t, func() error { return tc.request(t.Context()) })
			wantCode(t, err, codes.AlreadyExists, tc.wantReason)
		})
	}
}

func TestStaleEtag(t *testing.T) {
	e := newEnv(t)
	c := e.client
	ctx := t.Context()
	pool := e.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"})
	dept := e.mustCreateDepartment(t, "research")
	proj := e.mustCreateProject(t, "team-a", "")
	settings, err := c.GetSettings(ctx, &quotav1.GetSettingsRequest{Name: "settings"})
	if err != nil {
		t.Fatal(err)
	}
	// Change each once, so the etags read above are stale.
	if _, err := c.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{Name: pool.GetName(), Description: "v2"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{Department: &quotav1.Department{Name: dept.GetName(), Description: "v2"}}); err != nil {
		t.Fatal(err)
	}
	fresh, err := c.UpdateProject(ctx, &quotav1.UpdateProjectRequest{Project: &quotav1.Project{Name: proj.GetName(), Description: "v2"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings", RejectOverSubscription: true}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		request func(context.Context) error
	}{
		{"update a node pool", func(ctx context.Context) error {
			_, err := c.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{NodePool: &quotav1.NodePool{Name: pool.GetName(), Etag: pool.GetEtag(), Description: "v3"}})
			return err
		}},
		{"delete a node pool", func(ctx context.Context) error {
			_, err := c.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: pool.GetName(), Etag: pool.GetEtag()})
			return err
		}},
		{"update a department", func(ctx context.Context) error {
			_, err := c.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{Department: &quotav1.Department{Name: dept.GetName(), Etag: dept.GetEtag(), Description: "v3"}})
			return err
		}},
		{"delete a department", func(ctx context.Context) error {
			_, err := c.DeleteDepartment(ctx, &quotav1.DeleteDepartmentRequest{Name: dept.GetName(), Etag: dept.GetEtag()})
			return err
		}},
		{"update a project", func(ctx context.Context) error {
			_, err := c.UpdateProject(ctx, &quotav1.UpdateProjectRequest{Project: &quotav1.Project{Name: proj.GetName(), Etag: proj.GetEtag(), Description: "v3"}})
			return err
		}},
		{"delete a project", func(ctx context.Context) error {
			_, err := c.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: proj.GetName(), Etag: proj.GetEtag()})
			return err
		}},
		{"delete a project with an etag that is not a revision", func(ctx context.Context) error {
			_, err := c.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: proj.GetName(), Etag: "W/abc"})
			return err
		}},
		{"update the settings", func(ctx context.Context) error {
			_, err := c.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{Settings: &quotav1.Settings{Name: "settings", Etag: settings.GetEtag()},
				UpdateMask: mask("reject_over_subscription")})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.unchangedBy(t, func() error { return tc.request(t.Context()) })
			wantCode(t, err, codes.Aborted, "ETAG_MISMATCH")
			if metadata(err)["etag"] == "" || !strings.Contains(metadata(err)["name"], "/") && metadata(err)["name"] != "settings" {
				t.Fatalf("metadata = %v, want the name and the current etag", metadata(err))
			}
		})
	}
	// The current etag works.
	if _, err := c.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: proj.GetName(), Etag: fresh.GetEtag()}); err != nil {
		t.Fatal(err)
	}
}

func TestFailedPrecondition(t *testing.T) {
	e := newEnv(t)
	c := e.client
	e.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"})
	e.mustCreatePool(t, "spare", map[string]string{"run.ai/type": "spare"})
	e.mustCreatePool(t, "busy", map[string]string{"run.ai/type": "busy"})
	e.mustCreateDepartment(t, "research", gpus("dgx", 4))
	e.mustCreateProject(t, "team-a", "departments/research")
	e.mustCreateProject(t, "team-b", "departments/research")
	e.mustCreateProject(t, "team-c", "")
	// A workload of team-c, as the workload service stores it, names pool busy.
	e.putRaw(t, etcdstore.PrefixWorkloads+"team-c/train-1", &workloadv1.Workload{
		Name: "projects/team-c/workloads/train-1", Project: "projects/team-c",
		Spec: &workloadv1.WorkloadSpec{NodePools: []string{"nodepools/busy"}}})
	for _, tc := range []struct {
		name       string
		request    func(context.Context) error
		wantReason string
		wantMeta   map[string]string
	}{
		{"delete a department that has projects", func(ctx context.Context) error {
			_, err := c.DeleteDepartment(ctx, &quotav1.DeleteDepartmentRequest{Name: "departments/research"})
			return err
		}, "DEPARTMENT_NOT_EMPTY", map[string]string{"department": "departments/research", "projectCount": "2"}},
		{"delete the built-in department", func(ctx context.Context) error {
			_, err := c.DeleteDepartment(ctx, &quotav1.DeleteDepartmentRequest{Name: "departments/default"})
			return err
		}, "BUILT_IN_RESOURCE", map[string]string{"name": "departments/default"}},
		{"delete the built-in node pool", func(ctx context.Context) error {
			_, err := c.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/default"})
			return err
		}, "NODE_POOL_IN_USE", map[string]string{"nodePool": "nodepools/default"}},
		{"delete a node pool a department quota names", func(ctx context.Context) error {
			_, err := c.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/dgx"})
			return err
		}, "NODE_POOL_IN_USE", map[string]string{"nodePool": "nodepools/dgx"}},
		{"delete a node pool a workload names", func(ctx context.Context) error {
			_, err := c.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/busy"})
			return err
		}, "NODE_POOL_IN_USE", map[string]string{"nodePool": "nodepools/busy"}},
		{"delete a project that has workloads", func(ctx context.Context) error {
			_, err := c.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: "projects/team-c"})
			return err
		}, "PROJECT_NOT_EMPTY", map[string]string{"project": "projects/team-c", "workloadCount": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.unchangedBy(t, func() error { return tc.request(t.Context()) })
			wantCode(t, err, codes.FailedPrecondition, tc.wantReason)
			for k, v := range tc.wantMeta {
				if got := metadata(err)[k]; got != v {
					t.Fatalf("metadata %s = %q, want %q (%v)", k, got, v, err)
				}
			}
		})
	}

	// Once the projects are gone (or moved) the department can be deleted,
	// and an unused pool always can.
	ctx := t.Context()
	if _, err := c.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: "projects/team-a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpdateProject(ctx, &quotav1.UpdateProjectRequest{Project: &quotav1.Project{Name: "projects/team-b"}, UpdateMask: mask("department")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteDepartment(ctx, &quotav1.DeleteDepartmentRequest{Name: "departments/research"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/dgx"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: "nodepools/spare"}); err != nil {
		t.Fatal(err)
	}
}
