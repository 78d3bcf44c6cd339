package quota

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/timeslice"
	"github.com/runwayhq/runway/pkg/toleration"
)

// Request rules. Every check adds a violation with its AIP-193 field path
// (for example "project.node_pool_quotas[0].gpu.deserved_milli_gpus") and
// the request is rejected with all of them at once (apierr.Invalid), before
// anything is read from or written to the store.

// Collections: the first part of a resource name.
const (
	nodePoolsCollection   = "nodepools"
	departmentsCollection = "departments"
	projectsCollection    = "projects"
	settingsName          = "settings"

	builtInID      = "default" // nodepools/default and departments/default
	defaultPool    = nodePoolsCollection + "/" + builtInID
	defaultDept    = departmentsCollection + "/" + builtInID
	maxDescription = 1024
	maxLabelKey    = 253
	maxLabelValue  = 63
	minLeaseSlice  = 10 * time.Millisecond
	maxLeaseSlice  = 10 * time.Second
	// Time-based fair share: a half-life below a minute would follow single
	// cycles; above a year nothing would ever be forgotten.
	minHalfLife     = time.Minute
	maxHalfLife     = 365 * 24 * time.Hour
	maxHalfLifeText = "365 days"
	maxFairShareK   = 10
)

// idPattern is a resource id: 1-63 characters of [a-z0-9-], starting with a
// letter (proto/README.md).
var idPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

const idRule = "must be 1-63 characters of [a-z0-9-], starting with a letter"

// violations collects the bad fields of one request.
type violations []apierr.FieldViolation

func (v *violations) add(field, format string, args ...any) {
	*v = append(*v, apierr.FieldViolation{Field: field, Description: fmt.Sprintf(format, args...)})
}

// err is nil when nothing was added, else one INVALID_ARGUMENT naming every
// field.
func (v violations) err() error {
	if len(v) == 0 {
		return nil
	}
	return apierr.Invalid(v...)
}

// checkID checks a new resource's id.
func (v *violations) checkID(field, id string) {
	if !idPattern.MatchString(id) {
		v.add(field, "%s", idRule)
	}
}

// checkName checks that name is "<collection>/<id>" and returns the id.
func (v *violations) checkName(field, name, collection string) string {
	id, ok := strings.CutPrefix(name, collection+"/")
	if !ok || !idPattern.MatchString(id) {
		if name == "" {
			v.add(field, "is required: %s/{id}", collection)
		} else {
			v.add(field, "must be %s/{id}, with an id of 1-63 characters of [a-z0-9-] starting with a letter", collection)
		}
		return ""
	}
	return id
}

// parseName is checkName for a request whose only field is the name.
func parseName(field, name, collection string) (string, error) {
	var v violations
	id := v.checkName(field, name, collection)
	return id, v.err()
}

func (v *violations) checkRequired(field string, missing bool) {
	if missing {
		v.add(field, "is required")
	}
}

func (v *violations) checkDescription(field, d string) {
	if n := utf8.RuneCountInString(d); n > maxDescription {
		v.add(field, "must be at most %d characters, not %d", maxDescription, n)
	}
}

// checkPageSize checks a List page_size (AIP-158: 0 is the default, more than
// the maximum is capped, negative is an error).
func checkPageSize(size int32) error {
	if size < 0 {
		return apierr.InvalidField("page_size", "must be 0 (the default of 100) or more")
	}
	return nil
}

// checkNodePool checks a node pool as it will be stored (defaults applied).
func (v *violations) checkNodePool(field string, np *quotav1.NodePool, id string) {
	v.checkDescription(field+".description", np.GetDescription())
	sel := np.GetNodeSelector()
	switch {
	case id == builtInID && len(sel) > 0:
		v.add(field+".node_selector", "must be empty for the built-in node pool %s, which holds every node no other pool selects", defaultPool)
	case id != builtInID && len(sel) == 0:
		v.add(field+".node_selector", "must name at least one label; only %s selects every node", defaultPool)
	}
	for _, k := range sortedKeys(sel) {
		path := field + ".node_selector[" + strconv.Quote(k) + "]"
		if k == "" || len(k) > maxLabelKey || strings.ContainsAny(k, " \t\n") {
			v.add(path, "the label key must be 1-%d characters without spaces", maxLabelKey)
		}
		if len(sel[k]) > maxLabelValue {
			v.add(path, "the label value must be at most %d characters", maxLabelValue)
		}
	}
	if _, ok := quotav1.PlacementStrategy_name[int32(np.GetPlacementStrategy())]; !ok {
		v.add(field+".placement_strategy", "must be PLACEMENT_STRATEGY_BINPACK or PLACEMENT_STRATEGY_SPREAD")
	}
	ts := np.GetTimeSlicing()
	if _, ok := quotav1.TimeSlicingMode_name[int32(ts.GetMode())]; !ok {
		v.add(field+".time_slicing.mode", "must be TIME_SLICING_MODE_OFF, _STRICT or _FAIR")
	}
	if d := ts.GetLeaseDuration(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < minLeaseSlice || d.AsDuration() > maxLeaseSlice {
			v.add(field+".time_slicing.lease_duration", "must be between %s and %s", minLeaseSlice, maxLeaseSlice)
		}
	}
	if p := ts.GetPrecisionPercent(); !timeslice.ValidPrecision(int(p)) {
		v.add(field+".time_slicing.precision_percent", "must divide 100 into whole leases: 1, 2, 4, 5, 10, 20, 25 or 50 (0 means 5)")
	}
	if tb := np.GetTimeBasedFairShare(); tb != nil {
		d := tb.GetHalfLife()
		if d == nil || d.CheckValid() != nil || d.AsDuration() < minHalfLife || d.AsDuration() > maxHalfLife {
			v.add(field+".time_based_fair_share.half_life", "must be between %s and %s (leave time_based_fair_share unset to turn it off)", minHalfLife, maxHalfLifeText)
		}
		// NaN fails both comparisons, so it is rejected too.
		if k := tb.GetK(); !(k >= 0 && k <= maxFairShareK) {
			v.add(field+".time_based_fair_share.k", "must be between 0 and %g", float64(maxFairShareK))
		}
	}
	if ts := np.GetTolerations(); len(ts) > toleration.Max {
		v.add(field+".tolerations", "must have at most %d entries", toleration.Max)
	} else {
		for i, t := range ts {
			if f, why := toleration.Check(t); f != "" {
				v.add(fmt.Sprintf("%s.tolerations[%d].%s", field, i, f), "%s", why)
			}
		}
	}
}

// checkDepartment checks a department as it will be stored.
func (v *violations) checkDepartment(field string, d *quotav1.Department) {
	v.checkDescription(field+".description", d.GetDescription())
	v.checkQuotas(field+".node_pool_quotas", d.GetNodePoolQuotas())
	v.checkSchedulingRules(field+".scheduling_rules", d.GetSchedulingRules())
}

// checkProject checks a project as it will be stored.
func (v *violations) checkProject(field string, p *quotav1.Project) {
	v.checkDescription(field+".description", p.GetDescription())
	v.checkName(field+".department", p.GetDepartment(), departmentsCollection)
	v.checkQuotas(field+".node_pool_quotas", p.GetNodePoolQuotas())
	seen := map[string]bool{}
	for i, pool := range p.GetDefaultNodePools() {
		path := fmt.Sprintf("%s.default_node_pools[%d]", field, i)
		if v.checkName(path, pool, nodePoolsCollection) != "" && seen[pool] {
			v.add(path, "lists %s twice; name each node pool once", pool)
		}
		seen[pool] = true
	}
	v.checkSchedulingRules(field+".scheduling_rules", p.GetSchedulingRules())
}

// labelValue is a Kubernetes label value: node types are compared with the
// nodes' run.ai/type label.
var labelValue = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// checkSchedulingRules checks one entry per workload type, limits that are
// positive when set, and node types that are label values.
func (v *violations) checkSchedulingRules(field string, rules []*quotav1.SchedulingRules) {
	seen := map[workloadv1.WorkloadType]bool{}
	for i, r := range rules {
		path := fmt.Sprintf("%s[%d]", field, i)
		switch t := r.GetWorkloadType(); {
		case t == workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED || workloadv1.WorkloadType_name[int32(t)] == "":
			v.add(path+".workload_type", "must be WORKLOAD_TYPE_WORKSPACE, WORKLOAD_TYPE_TRAINING or WORKLOAD_TYPE_INFERENCE")
		case seen[t]:
			v.add(path+".workload_type", "has a second entry for %s; give each workload type one entry", t)
		}
		seen[r.GetWorkloadType()] = true
		if d := r.GetTimeLimit(); d != nil && (!d.IsValid() || d.AsDuration() <= 0) {
			v.add(path+".time_limit", "must be more than 0 when set")
		}
		if d := r.GetIdleGpuLimit(); d != nil && (!d.IsValid() || d.AsDuration() <= 0) {
			v.add(path+".idle_gpu_limit", "must be more than 0 when set")
		}
		for i, d := range []*durationpb.Duration{r.GetPreemptibleTimeLimit(), r.GetPreemptibleIdleGpuLimit()} {
			name := [...]string{"preemptible_time_limit", "preemptible_idle_gpu_limit"}[i]
			switch {
			case d == nil:
			case r.GetWorkloadType() != workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE:
				v.add(path+"."+name, "is for workspace rules only: trainings are always preemptible and inferences never")
			case !d.IsValid() || d.AsDuration() <= 0:
				v.add(path+"."+name, "must be more than 0 when set")
			}
		}
		if r.GetPreemptWhenIdle() && r.GetIdleGpuLimit() == nil && r.GetPreemptibleIdleGpuLimit() == nil {
			v.add(path+".preempt_when_idle", "needs idle_gpu_limit or preemptible_idle_gpu_limit")
		}
		for j, nt := range r.GetNodeTypes() {
			if !labelValue.MatchString(nt) {
				v.add(fmt.Sprintf("%s.node_types[%d]", path, j), "must be a label value: 1-63 characters of [A-Za-z0-9._-], starting and ending with a letter or digit")
			}
		}
	}
}

// checkQuotas checks node_pool_quotas with every field set (defaults applied).
func (v *violations) checkQuotas(field string, qs []*quotav1.NodePoolQuota) {
	seen := map[string]bool{}
	for i, q := range qs {
		path := fmt.Sprintf("%s[%d]", field, i)
		if v.checkName(path+".node_pool", q.GetNodePool(), nodePoolsCollection) != "" && seen[q.GetNodePool()] {
			v.add(path+".node_pool", "has a second entry for %s; give each node pool one entry", q.GetNodePool())
		}
		seen[q.GetNodePool()] = true
		g, c, m := q.GetGpu(), q.GetCpu(), q.GetMemory()
		v.checkAmounts(path+".gpu", "milli_gpus", g.GetDeservedMilliGpus(), g.GetLimitMilliGpus(), g.GetOverQuotaWeight())
		v.checkAmounts(path+".cpu", "milli_cpu", c.GetDeservedMilliCpu(), c.GetLimitMilliCpu(), c.GetOverQuotaWeight())
		v.checkAmounts(path+".memory", "memory_bytes", m.GetDeservedMemoryBytes(), m.GetLimitMemoryBytes(), m.GetOverQuotaWeight())
	}
}

// checkAmounts checks one resource's quota: deserved and limit are -1
// (unlimited) or at least 0, the limit is not below a finite deserved, and
// the weight is not negative.
func (v *violations) checkAmounts(field, unit string, deserved, limit int64, weight int32) {
	deservedField, limitField := field+".deserved_"+unit, field+".limit_"+unit
	if deserved < -1 {
		v.add(deservedField, "must be -1 (unlimited) or at least 0, not %d", deserved)
	}
	switch {
	case limit < -1:
		v.add(limitField, "must be -1 (no limit) or at least 0, not %d", limit)
	case limit != -1 && deserved >= 0 && limit < deserved:
		v.add(limitField, "must be -1 (no limit) or at least deserved_%s (%d), not %d", unit, deserved, limit)
	}
	if weight < 0 {
		v.add(field+".over_quota_weight", "must be at least 0, not %d", weight)
	}
}

// projectFilter parses the one filter ListProjects supports,
// `department = "departments/x"`, and returns the department ("" for none).
var projectFilter = regexp.MustCompile(`^\s*department\s*=\s*"([^"]*)"\s*$`)

func parseProjectFilter(filter string) (string, error) {
	if strings.TrimSpace(filter) == "" {
		return "", nil
	}
	m := projectFilter.FindStringSubmatch(filter)
	if m == nil {
		return "", apierr.InvalidFilter(filter, `the only supported filter is department = "departments/{department}"`)
	}
	var v violations
	if v.checkName("filter", m[1], departmentsCollection); len(v) > 0 {
		return "", apierr.InvalidFilter(filter, "the department must be departments/{department}")
	}
	return m[1], nil
}
