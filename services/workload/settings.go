package workload

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/policy"
)

// settingsSource is WorkloadLimits.source when only the account's settings
// (workspace_auto_suspend) limit a workload.
const settingsSource = "settings"

// Settings reads the quota service's settings singleton. Missing (only
// before the quota service's bootstrap ran) means the defaults.
func (p StoredProjects) Settings(ctx context.Context) (*quotav1.Settings, error) {
	it, err := p.settings.Get(ctx, settingsID)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return &quotav1.Settings{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the settings: %w", err)
	}
	return it.Msg, nil
}

// Settings asks QuotaService.GetSettings.
func (q QuotaProjects) Settings(ctx context.Context) (*quotav1.Settings, error) {
	st, err := q.Client.GetSettings(ctx, &quotav1.GetSettingsRequest{Name: settingsID})
	if err != nil {
		return nil, fmt.Errorf("ask the quota service for the settings: %w", err)
	}
	return st, nil
}

// settingsID is the settings singleton's id under etcdstore.Root (its key
// is etcdstore.KeySettings) and its resource name.
const settingsID = "settings"

// applySettings completes a spec the policy has filled: a workspace with no
// priority may run over quota when the settings allow it by default, unless
// a policy rules the priority (the narrower scope's word wins, and its
// options might not hold the settings' choice).
func applySettings(st *quotav1.Settings, eff *policy.Effective, typ workloadv1.WorkloadType, spec *workloadv1.WorkloadSpec) {
	if e := eff.Fields["priority"]; e != nil && e.Rule != nil {
		return
	}
	if st.GetAllowOverQuotaByDefault() && typ == workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE && spec.GetPriority() == "" {
		spec.Priority = cluster.PriorityInteractivePreemptible.Name
	}
}

// checkSettings adds a violation for what the settings forbid: part of a
// GPU when GPU resource optimisation is off (unset means on).
func checkSettings(v *violations, st *quotav1.Settings, spec *workloadv1.WorkloadSpec) {
	if st.GpuResourceOptimization == nil || st.GetGpuResourceOptimization() {
		return
	}
	switch spec.GetGpu().GetAmount().(type) {
	case *workloadv1.GpuRequest_FractionMilli, *workloadv1.GpuRequest_GpuMemoryBytes:
		v.add("workload.spec.gpu", "must be whole devices: GPU resource optimisation (fractions, GPU memory) is off in the settings")
	}
}

// withAutoSuspend gives a workspace the settings' auto-suspend time limit
// when its rules set none.
func withAutoSuspend(l *workloadv1.WorkloadLimits, st *quotav1.Settings, typ workloadv1.WorkloadType) *workloadv1.WorkloadLimits {
	d := st.GetWorkspaceAutoSuspend()
	if d == nil || typ != workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE || l.GetTimeLimit() != nil {
		return l
	}
	if l == nil {
		l = &workloadv1.WorkloadLimits{Source: settingsSource}
	}
	l.TimeLimit = durationpb.New(d.AsDuration())
	return l
}
