package quota_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

func TestOverSubscription_projects(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.mustCreateDepartment(t, "research", gpus("default", 6))
	e.mustCreateProject(t, "team-a", "departments/research", gpus("default", 4))

	// Off (the default): projects may deserve more than their department.
	e.mustCreateProject(t, "team-b", "departments/research", gpus("default", 3))
	if _, err := e.client.DeleteProject(ctx, &quotav1.DeleteProjectRequest{Name: "projects/team-b"}); err != nil {
		t.Fatal(err)
	}

	e.setRejectOverSubscription(t, true)
	e.mustCreateProject(t, "team-b", "departments/research", gpus("default", 2)) // 6 of 6: fits exactly

	wantOver := func(t *testing.T, err error, wantMessage string, wantMeta map[string]string) {
		t.Helper()
		wantCode(t, err, codes.FailedPrecondition, "OVER_SUBSCRIBED")
		if msg := status.Convert(err).Message(); !strings.Contains(msg, wantMessage) {
			t.Fatalf("message %q, want it to contain %q", msg, wantMessage)
		}
		if diff := cmp.Diff(wantMeta, metadata(err)); diff != "" {
			t.Fatalf("metadata (-want +got):\n%s", diff)
		}
	}
	research := map[string]string{"parent": "departments/research", "nodePool": "nodepools/default",
		"resource": "gpu", "deserved": "7", "available": "6"}

	t.Run("a new project above the department", func(t *testing.T) {
		err := e.unchangedBy(t, func() error {
			_, err := e.client.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "team-c",
				Project: &quotav1.Project{Department: "departments/research", NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("default", 1)}}})
			return err
		})
		wantOver(t, err, "Department research: projects would deserve 7 GPUs in pool default, above the department's 6", research)
	})
	t.Run("a project raising its quota above the department", func(t *testing.T) {
		err := e.unchangedBy(t, func() error {
			_, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
				Project: &quotav1.Project{Name: "projects/team-b", NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("default", 3)}}})
			return err
		})
		wantOver(t, err, "projects would deserve 7 GPUs in pool default, above the department's 6", research)
	})
	t.Run("a project moving into a full department", func(t *testing.T) {
		e.mustCreateProject(t, "team-d", "", gpus("default", 1))
		err := e.unchangedBy(t, func() error {
			_, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
				Project: &quotav1.Project{Name: "projects/team-d", Department: "departments/research"}})
			return err
		})
		wantOver(t, err, "projects would deserve 7 GPUs in pool default, above the department's 6", research)
	})
	t.Run("a department lowering its quota below its projects", func(t *testing.T) {
		err := e.unchangedBy(t, func() error {
			_, err := e.client.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{
				Department: &quotav1.Department{Name: "departments/research", NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("default", 5)}}})
			return err
		})
		wantOver(t, err, "projects would deserve 6 GPUs in pool default, above the department's 5",
			map[string]string{"parent": "departments/research", "nodePool": "nodepools/default", "resource": "gpu", "deserved": "6", "available": "5"})
		var violation *errdetails.PreconditionFailure_Violation
		for _, d := range status.Convert(err).Details() {
			if pf, ok := d.(*errdetails.PreconditionFailure); ok && len(pf.GetViolations()) == 1 {
				violation = pf.GetViolations()[0]
			}
		}
		if violation.GetType() != "OVER_SUBSCRIBED" || violation.GetSubject() != "departments/research" {
			t.Fatalf("PreconditionFailure violation = %v, want type OVER_SUBSCRIBED on departments/research", violation)
		}
	})
	t.Run("CPU counts like GPUs; unlimited quotas do not count", func(t *testing.T) {
		cpu := func(milli int64) []*quotav1.NodePoolQuota {
			return []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: i64(0)},
				Cpu: &quotav1.CpuQuota{DeservedMilliCpu: i64(milli)}}}
		}
		e.mustCreateDepartment(t, "ops", cpu(8000)...)
		e.mustCreateProject(t, "ops-a", "departments/ops", cpu(-1)...) // unlimited: not counted
		err := e.unchangedBy(t, func() error {
			_, err := e.client.CreateProject(ctx, &quotav1.CreateProjectRequest{ProjectId: "ops-b",
				Project: &quotav1.Project{Department: "departments/ops", NodePoolQuotas: cpu(9000)}})
			return err
		})
		wantOver(t, err, "Department ops: projects would deserve 9 cores in pool default, above the department's 8",
			map[string]string{"parent": "departments/ops", "nodePool": "nodepools/default", "resource": "cpu", "deserved": "9", "available": "8"})
	})

	// A change that does not add to an excess that already exists goes
	// through: turn the check off, over-subscribe, turn it on again.
	e.setRejectOverSubscription(t, false)
	e.mustCreateProject(t, "team-e", "departments/research", gpus("default", 2)) // 8 of 6
	e.setRejectOverSubscription(t, true)
	if _, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
		Project: &quotav1.Project{Name: "projects/team-e", Description: "only a description"}}); err != nil {
		t.Fatalf("a description change in an over-subscribed department: %v", err)
	}
	if _, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
		Project: &quotav1.Project{Name: "projects/team-e", NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("default", 1)}}}); err != nil {
		t.Fatalf("lowering a quota in an over-subscribed department: %v", err)
	}
}

func TestOverSubscription_poolCapacity(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.setRejectOverSubscription(t, true)

	// No node registered: the pool's capacity is unknown and not checked.
	e.mustCreateDepartment(t, "research", gpus("default", 6))

	// Two Ready nodes of 4 GPUs, one NotReady and one drained: 8 GPUs.
	node := func(id string, readiness nodemanagerv1.Readiness, drained bool) {
		four := func() *commonv1.ResourceQuantity {
			return &commonv1.ResourceQuantity{MilliGpus: 4000, MilliCpu: 64000, MemoryBytes: 512 << 30}
		}
		e.putRaw(t, etcdstore.PrefixNodes+id, &nodemanagerv1.Node{Name: "nodes/" + id, NodePool: "nodepools/default",
			Readiness: readiness, Drained: drained, Capacity: four(), Allocatable: four()})
	}
	node("node-1", nodemanagerv1.Readiness_READINESS_READY, false)
	node("node-2", nodemanagerv1.Readiness_READINESS_READY, false)
	node("node-3", nodemanagerv1.Readiness_READINESS_NOT_READY, false)
	node("node-4", nodemanagerv1.Readiness_READINESS_READY, true)

	e.mustCreateDepartment(t, "ops", gpus("default", 2)) // 8 of 8
	err := e.unchangedBy(t, func() error {
		_, err := e.client.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: "infra",
			Department: &quotav1.Department{NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("default", 2)}}})
		return err
	})
	wantCode(t, err, codes.FailedPrecondition, "OVER_SUBSCRIBED")
	if msg, want := status.Convert(err).Message(), "Node pool default: departments would deserve 10 GPUs, above the 8 its Ready nodes have"; !strings.Contains(msg, want) {
		t.Fatalf("message %q, want it to contain %q", msg, want)
	}
	wantMeta := map[string]string{"parent": "nodepools/default", "nodePool": "nodepools/default", "resource": "gpu", "deserved": "10", "available": "8"}
	if diff := cmp.Diff(wantMeta, metadata(err)); diff != "" {
		t.Fatalf("metadata (-want +got):\n%s", diff)
	}
	err = e.unchangedBy(t, func() error {
		_, err := e.client.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{
			Department: &quotav1.Department{Name: "departments/ops", NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("default", 3)}}})
		return err
	})
	wantCode(t, err, codes.FailedPrecondition, "OVER_SUBSCRIBED")

	// A node whose pool the node manager has not set is placed by labels.
	e.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"})
	e.putRaw(t, etcdstore.PrefixNodes+"dgx-1", &nodemanagerv1.Node{Name: "nodes/dgx-1", Labels: map[string]string{"run.ai/type": "dgx"},
		Readiness: nodemanagerv1.Readiness_READINESS_READY, Capacity: &commonv1.ResourceQuantity{MilliGpus: 8000}})
	e.mustCreateDepartment(t, "vision", gpus("dgx", 8))
	_, err = e.client.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: "speech",
		Department: &quotav1.Department{NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("dgx", 1)}}})
	wantCode(t, err, codes.FailedPrecondition, "OVER_SUBSCRIBED")
	if got := metadata(err)["nodePool"]; got != "nodepools/dgx" {
		t.Fatalf("nodePool = %q, want nodepools/dgx", got)
	}

	// Off: the same department is accepted.
	e.setRejectOverSubscription(t, false)
	e.mustCreateDepartment(t, "infra", gpus("default", 2))
}

// TestOverSubscription_concurrentCreates: two projects created at once, each
// fitting alone but not together, never both commit (the change is guarded
// on the whole projects prefix, not only on the keys it read).
func TestOverSubscription_concurrentCreates(t *testing.T) {
	e := newEnv(t)
	e.setRejectOverSubscription(t, true)
	e.mustCreateDepartment(t, "research", gpus("default", 6))
	for round := range 5 {
		ids := []string{"a", "b"}
		errs := make([]error, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() {
				_, errs[i] = e.client.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: id + "-" + string(rune('0'+round)),
					Project: &quotav1.Project{Department: "departments/research", NodePoolQuotas: []*quotav1.NodePoolQuota{gpus("default", 4)}}})
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			}
		}
		if round == 0 && ok != 1 {
			t.Fatalf("round %d: %d of 2 creates succeeded (%v), want exactly 1", round, ok, errs)
		}
		if round > 0 && ok != 0 {
			t.Fatalf("round %d: %d creates succeeded in a full department (%v)", round, ok, errs)
		}
	}
}
