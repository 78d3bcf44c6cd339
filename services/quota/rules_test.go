package quota_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// Scheduling rules are stored on projects and departments like any other
// field, updated through update_mask, and checked before anything is written.
func TestSchedulingRules_UpdateAndValidate(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.mustCreateDepartment(t, "research")
	e.mustCreateProject(t, "team-a", "departments/research")

	rules := []*quotav1.SchedulingRules{
		{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, TimeLimit: durationpb.New(8 * time.Hour), NodeTypes: []string{"dgx", "a100"}},
		{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, IdleGpuLimit: durationpb.New(30 * time.Minute), PreemptWhenIdle: true},
	}
	p, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
		Project:    &quotav1.Project{Name: "projects/team-a", SchedulingRules: rules},
		UpdateMask: mask("scheduling_rules"),
	})
	if err != nil {
		t.Fatal(err)
	}
	// A call through no guard acts from the account, and each entry says so.
	stored := make([]*quotav1.SchedulingRules, len(rules))
	for i, r := range rules {
		stored[i] = proto.Clone(r).(*quotav1.SchedulingRules)
		stored[i].SetBy = "account"
	}
	if diff := cmp.Diff(stored, p.GetSchedulingRules(), protocmp.Transform()); diff != "" {
		t.Errorf("project rules (-want +got):\n%s", diff)
	}
	d, err := e.client.UpdateDepartment(ctx, &quotav1.UpdateDepartmentRequest{
		Department: &quotav1.Department{Name: "departments/research", SchedulingRules: rules[:1]},
		UpdateMask: mask("scheduling_rules"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.GetSchedulingRules()) != 1 {
		t.Errorf("department rules %v, want the one set", d.GetSchedulingRules())
	}

	before := e.state(t)
	_, err = e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
		Project: &quotav1.Project{Name: "projects/team-a", SchedulingRules: []*quotav1.SchedulingRules{
			{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, TimeLimit: durationpb.New(-time.Second)},
			{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, NodeTypes: []string{"no spaces"}, PreemptWhenIdle: true},
			{},
		}},
		UpdateMask: mask("scheduling_rules"),
	})
	wantCode(t, err, codes.InvalidArgument, "INVALID_FIELD")
	want := []string{
		"project.scheduling_rules[0].time_limit",
		"project.scheduling_rules[1].workload_type",
		"project.scheduling_rules[1].preempt_when_idle",
		"project.scheduling_rules[1].node_types[0]",
		"project.scheduling_rules[2].workload_type",
	}
	if got := violationFields(err); !slices.Equal(got, want) {
		t.Errorf("field violations %q, want %q", got, want)
	}
	assertSameState(t, before, e.state(t))
}

// Limits of their own for preemptible workspaces: stored on a workspace
// rule (preempt_when_idle may lean on the preemptible idle limit alone),
// refused on other types' rules and when not positive.
func TestSchedulingRules_PreemptibleLimits(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.mustCreateProject(t, "team-a", "")
	ws := &quotav1.SchedulingRules{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE,
		TimeLimit: durationpb.New(24 * time.Hour), PreemptibleTimeLimit: durationpb.New(4 * time.Hour),
		PreemptibleIdleGpuLimit: durationpb.New(30 * time.Minute), PreemptWhenIdle: true}
	p, err := e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
		Project: &quotav1.Project{Name: "projects/team-a", SchedulingRules: []*quotav1.SchedulingRules{ws}}, UpdateMask: mask("scheduling_rules")})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.GetSchedulingRules()[0]; r.GetPreemptibleTimeLimit().AsDuration() != 4*time.Hour || r.GetPreemptibleIdleGpuLimit().AsDuration() != 30*time.Minute {
		t.Fatalf("stored rule %v", r)
	}
	before := e.state(t)
	_, err = e.client.UpdateProject(ctx, &quotav1.UpdateProjectRequest{
		Project: &quotav1.Project{Name: "projects/team-a", SchedulingRules: []*quotav1.SchedulingRules{
			{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, PreemptibleTimeLimit: durationpb.New(time.Hour)},
			{WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, PreemptibleIdleGpuLimit: durationpb.New(-time.Second)},
		}},
		UpdateMask: mask("scheduling_rules")})
	wantCode(t, err, codes.InvalidArgument, "INVALID_FIELD")
	want := []string{"project.scheduling_rules[0].preemptible_time_limit", "project.scheduling_rules[1].preemptible_idle_gpu_limit"}
	if got := violationFields(err); !slices.Equal(got, want) {
		t.Errorf("field violations %q, want %q", got, want)
	}
	assertSameState(t, before, e.state(t))
}
