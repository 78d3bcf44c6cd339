package workload_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// putSettings writes the settings singleton as the quota service would.
func (e *env) putSettings(t *testing.T, st *quotav1.Settings) {
	t.Helper()
	st.Name = "settings"
	if _, err := etcdstore.NewBatch(e.etcd.Client).Put(etcdstore.KeySettings, st).Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func workspaceOf(priority string, gpu *workloadv1.GpuRequest) *workloadv1.Workload {
	return &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE,
		Spec: &workloadv1.WorkloadSpec{Image: "jupyter/base-notebook", Priority: priority, Gpu: gpu}}
}

// TestSettings_AllowOverQuotaByDefault: with the option on, a workspace
// that names no priority may run over quota (interactive-preemptible); one
// that names build keeps it; with it off the type's default holds.
func TestSettings_AllowOverQuotaByDefault(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	if got := e.create(t, "team-a", "before", workspaceOf("", nil)).GetSpec().GetPriority(); got != "build" {
		t.Fatalf("priority with the option off = %q, want build", got)
	}
	e.putSettings(t, &quotav1.Settings{AllowOverQuotaByDefault: true})
	if got := e.create(t, "team-a", "over", workspaceOf("", nil)).GetSpec().GetPriority(); got != "interactive-preemptible" {
		t.Fatalf("priority with the option on = %q, want interactive-preemptible", got)
	}
	if got := e.create(t, "team-a", "named", workspaceOf("build", nil)).GetSpec().GetPriority(); got != "build" {
		t.Fatalf("a named priority became %q", got)
	}
	if got := e.create(t, "team-a", "train", training()).GetSpec().GetPriority(); got != "train" {
		t.Fatalf("a training's priority became %q", got)
	}
	// A policy that rules the priority keeps it: its options hold.
	if _, err := e.gov.UpdatePolicy(t.Context(), &workloadv1.UpdatePolicyRequest{AllowMissing: true, Policy: &workloadv1.Policy{
		Name: "projects/team-a/policies/workspace", Rules: map[string]*workloadv1.FieldRule{"priority": {Options: []string{"build"}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := e.create(t, "team-a", "ruled", workspaceOf("", nil)).GetSpec().GetPriority(); got != "build" {
		t.Fatalf("priority under a policy's priority rule = %q, want build", got)
	}
}

// TestSettings_GPUResourceOptimizationOff: part of a GPU is refused, whole
// devices are not; with the option back on (or unset) fractions pass.
func TestSettings_GPUResourceOptimizationOff(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	e.putSettings(t, &quotav1.Settings{GpuResourceOptimization: proto.Bool(false)})
	for name, gpu := range map[string]*workloadv1.GpuRequest{
		"fraction": {Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}},
		"memory":   {Amount: &workloadv1.GpuRequest_GpuMemoryBytes{GpuMemoryBytes: 4 << 30}},
	} {
		before, rev := e.storeState(t)
		_, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: name,
			Workload: workspaceOf("", gpu)})
		wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
		if _, ok := violations(err)["workload.spec.gpu"]; !ok {
			t.Fatalf("%s: violations %v", name, violations(err))
		}
		after, rev2 := e.storeState(t)
		if len(after) != len(before) || rev2 != rev {
			t.Fatalf("%s: a refused submit wrote something", name)
		}
	}
	e.create(t, "team-a", "whole", workspaceOf("", &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}))
	e.putSettings(t, &quotav1.Settings{})
	e.create(t, "team-a", "half", workspaceOf("", &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: 500}}))
}

// TestSettings_WorkspaceAutoSuspend: a workspace whose rules set no time
// limit gets the settings' one; a rule's own limit wins; other types are
// not touched.
func TestSettings_WorkspaceAutoSuspend(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"free": "research"})
	e.addOrg(t, map[string]string{"ruled": "ops"}, &quotav1.SchedulingRules{
		WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, IdleGpuLimit: durationpb.New(time.Hour)})
	e.addOrg(t, map[string]string{"timed": "lab"}, &quotav1.SchedulingRules{
		WorkloadType: workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, TimeLimit: durationpb.New(2 * time.Hour)})
	e.putSettings(t, &quotav1.Settings{WorkspaceAutoSuspend: durationpb.New(8 * time.Hour)})

	l := e.create(t, "free", "ws", workspaceOf("", nil)).GetLimits()
	if l.GetTimeLimit().AsDuration() != 8*time.Hour || l.GetSource() != "settings" {
		t.Fatalf("no rule: limits %v", l)
	}
	l = e.create(t, "ruled", "ws", workspaceOf("", nil)).GetLimits()
	if l.GetTimeLimit().AsDuration() != 8*time.Hour || l.GetIdleGpuLimit().AsDuration() != time.Hour || l.GetSource() != "projects/ruled" {
		t.Fatalf("a rule without a time limit: limits %v", l)
	}
	l = e.create(t, "timed", "ws", workspaceOf("", nil)).GetLimits()
	if l.GetTimeLimit().AsDuration() != 2*time.Hour {
		t.Fatalf("a rule's time limit: limits %v", l)
	}
	if l := e.create(t, "free", "train", training()).GetLimits(); l != nil {
		t.Fatalf("a training got limits %v", l)
	}
}
