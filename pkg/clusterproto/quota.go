package clusterproto

import (
	"strings"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/fairshare"
)

// Conversions from the stored quota resources to the scheduler's model
// (pkg/cluster). The Scheduler service watches the quota keys and calls
// these; the Quota service uses them to check over-subscription with the
// same defaults.
//
// Names: the scheduler's model uses bare ids ("team-a", "default"), the API
// resource names ("projects/team-a", "nodepools/default").

// DepartmentQueue returns what cluster.State.AddDepartment takes for d: its
// id and its quotas by node pool id. Pools d does not list get the model's
// default (cluster.DefaultQuota, or cluster.UnlimitedQuota for "default").
func DepartmentQueue(d *quotav1.Department) (id string, quotas map[string]cluster.Quota) {
	id = ID(d.GetName())
	base := cluster.DefaultQuota()
	if id == cluster.DefaultDepartment {
		base = cluster.UnlimitedQuota()
	}
	return id, ClusterQuotas(d.GetNodePoolQuotas(), base)
}

// ProjectQueue returns what cluster.State.AddProject takes for p: its id,
// its department's id and its quotas by node pool id.
func ProjectQueue(p *quotav1.Project) (id, department string, quotas map[string]cluster.Quota) {
	department = ID(p.GetDepartment())
	if department == "" {
		department = cluster.DefaultDepartment
	}
	return ID(p.GetName()), department, ClusterQuotas(p.GetNodePoolQuotas(), cluster.DefaultQuota())
}

// ClusterQuotas converts node_pool_quotas to quotas by node pool id, each
// with ToClusterQuota(q, base).
func ClusterQuotas(qs []*quotav1.NodePoolQuota, base cluster.Quota) map[string]cluster.Quota {
	out := make(map[string]cluster.Quota, len(qs))
	for _, q := range qs {
		out[ID(q.GetNodePool())] = ToClusterQuota(q, base)
	}
	return out
}

// ToClusterQuota converts one NodePoolQuota to the scheduler's cluster.Quota.
// Stored quotas have every field set; a field that is unset anyway takes
// base's value (cluster.DefaultQuota() for projects and departments,
// cluster.UnlimitedQuota() for departments/default).
//
// The over-quota weights are per resource in both. cluster.Quota has one
// over-quota switch for all resources where the API has one per resource, so
// a resource with over_quota_enabled false has its Limit lowered to its
// deserved quota (when that is finite): exactly what EffectiveLimit does for
// OverQuota false, but per resource. OverQuota is the GPU switch, unless
// turning it off would also cap a resource whose own switch is on (then it
// stays true and the lowered limits do the work). Either way
// EffectiveLimit(r) is what the API means, for every r.
func ToClusterQuota(q *quotav1.NodePoolQuota, base cluster.Quota) cluster.Quota {
	g, c, m := q.GetGpu(), q.GetCpu(), q.GetMemory()
	if g == nil {
		g = &quotav1.GpuQuota{}
	}
	if c == nil {
		c = &quotav1.CpuQuota{}
	}
	if m == nil {
		m = &quotav1.MemoryQuota{}
	}
	out := cluster.Quota{
		Deserved: cluster.Resources{
			GPU:    value(g.DeservedMilliGpus, base.Deserved.GPU),
			CPU:    value(c.DeservedMilliCpu, base.Deserved.CPU),
			Memory: value(m.DeservedMemoryBytes, base.Deserved.Memory),
		},
		Limit: cluster.Resources{
			GPU:    value(g.LimitMilliGpus, base.Limit.GPU),
			CPU:    value(c.LimitMilliCpu, base.Limit.CPU),
			Memory: value(m.LimitMemoryBytes, base.Limit.Memory),
		},
		Weight: cluster.Weights{
			float64(value(g.OverQuotaWeight, int32(base.Weight.Get(cluster.GPU)))),
			float64(value(c.OverQuotaWeight, int32(base.Weight.Get(cluster.CPU)))),
			float64(value(m.OverQuotaWeight, int32(base.Weight.Get(cluster.Memory)))),
		},
	}
	enabled := [cluster.NumResources]bool{
		value(g.OverQuotaEnabled, base.OverQuota),
		value(c.OverQuotaEnabled, base.OverQuota),
		value(m.OverQuotaEnabled, base.OverQuota),
	}
	out.OverQuota = enabled[cluster.GPU]
	for r := cluster.Resource(0); r < cluster.NumResources; r++ {
		d, l := out.Deserved.Get(r), out.Limit.Get(r)
		capped := d != cluster.Unlimited && (l == cluster.Unlimited || d < l)
		if !enabled[r] && capped {
			out.Limit = out.Limit.Set(r, d)
		}
		if enabled[r] && capped {
			out.OverQuota = true // a false switch would cap r too
		}
	}
	return out
}

// QuotaIn returns the quota of qs in the node pool named pool
// ("nodepools/x"), or base when qs has no entry for it.
func QuotaIn(qs []*quotav1.NodePoolQuota, pool string, base cluster.Quota) cluster.Quota {
	for _, q := range qs {
		if q.GetNodePool() == pool {
			return ToClusterQuota(q, base)
		}
	}
	return base
}

// ID is the last segment of a resource name: "projects/team-a" → "team-a".
func ID(name string) string {
	return name[strings.LastIndexByte(name, '/')+1:]
}

func value[T int64 | int32 | bool](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// TimeBased converts a node pool's time_based_fair_share to the model's
// setting: unset is off; an unset k is 1 (the Quota service stores it set).
func TimeBased(np *quotav1.NodePool) fairshare.TimeBased {
	tb := np.GetTimeBasedFairShare()
	if tb == nil {
		return fairshare.TimeBased{}
	}
	k := 1.0
	if tb.K != nil {
		k = tb.GetK()
	}
	return fairshare.TimeBased{HalfLife: tb.GetHalfLife().AsDuration(), K: k}
}
