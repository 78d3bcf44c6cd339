package quota

import (
	"fmt"
	"slices"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// The over-subscription rule (Settings.reject_over_subscription). In a node
// pool and a resource, a parent is over-subscribed when the deserved quotas
// of its children add up to more than it has: a department's projects above
// the department's deserved quota, or all departments above the pool's Ready
// capacity. Unlimited (-1) quotas are not counted, and an unlimited parent is
// never over-subscribed.
//
// A change is rejected only if it leaves a parent over-subscribed AND makes
// the excess larger than it was ("existing quotas are not re-checked when
// this is turned on"): a project that only changes its description in an
// already over-subscribed department goes through, one that raises its
// deserved GPUs there does not, and neither does a department that lowers
// its deserved quota below its projects'.

// load is one parent's side of the rule in one pool and resource.
type load struct {
	sumBefore, sumAfter     int64 // the children's deserved, unlimited ones not counted
	availBefore, availAfter int64 // the parent's deserved or capacity; cluster.Unlimited for none
}

// worse reports whether the change leaves the parent over-subscribed with a
// larger excess than before.
func (l load) worse() bool {
	if l.availAfter == cluster.Unlimited || l.sumAfter <= l.availAfter {
		return false
	}
	return l.availBefore == cluster.Unlimited || l.sumAfter-l.availAfter > l.sumBefore-l.availBefore
}

// deservedSum adds up the finite deserved quotas of r in pool over qs.
func deservedSum(qs [][]*quotav1.NodePoolQuota, pool string, r cluster.Resource, base cluster.Quota) int64 {
	var sum int64
	for _, q := range qs {
		if d := clusterproto.QuotaIn(q, pool, base).Deserved.Get(r); d != cluster.Unlimited {
			sum += d
		}
	}
	return sum
}

// departmentBase is the quota a department has in a pool it does not list.
func departmentBase(name string) cluster.Quota {
	if name == defaultDept {
		return cluster.UnlimitedQuota()
	}
	return cluster.DefaultQuota()
}

// checkDepartmentLoad checks the projects of the department, before and
// after the change (the department itself may change too: before and after
// are its two versions; they are the same for a project change).
func checkDepartmentLoad(before, after *quotav1.Department, projectsBefore, projectsAfter []*quotav1.Project) error {
	name := after.GetName()
	base := departmentBase(name)
	quotasOf := func(ps []*quotav1.Project) [][]*quotav1.NodePoolQuota {
		var out [][]*quotav1.NodePoolQuota
		for _, p := range ps {
			if p.GetDepartment() == name {
				out = append(out, p.GetNodePoolQuotas())
			}
		}
		return out
	}
	qb, qa := quotasOf(projectsBefore), quotasOf(projectsAfter)
	for _, pool := range poolsNamed(append(append([][]*quotav1.NodePoolQuota{before.GetNodePoolQuotas(), after.GetNodePoolQuotas()}, qb...), qa...)) {
		for r := cluster.Resource(0); r < cluster.NumResources; r++ {
			l := load{
				sumBefore:   deservedSum(qb, pool, r, cluster.DefaultQuota()),
				sumAfter:    deservedSum(qa, pool, r, cluster.DefaultQuota()),
				availBefore: clusterproto.QuotaIn(before.GetNodePoolQuotas(), pool, base).Deserved.Get(r),
				availAfter:  clusterproto.QuotaIn(after.GetNodePoolQuotas(), pool, base).Deserved.Get(r),
			}
			if l.worse() {
				msg := fmt.Sprintf("Department %s: projects would deserve %s in pool %s, above the department's %s; lower a project's deserved quota or raise the department's.",
					clusterproto.ID(name), cluster.Quantity(r, l.sumAfter), clusterproto.ID(pool), cluster.FormatAmount(r, l.availAfter))
				return overSubscribed(name, pool, r, l, msg)
			}
		}
	}
	return nil
}

// checkPoolLoad checks all departments against the Ready capacity of each
// pool whose capacity is known, before and after the change.
func checkPoolLoad(before, after []*quotav1.Department, capacity map[string]poolCapacity) error {
	var named [][]*quotav1.NodePoolQuota
	for _, d := range append(slices.Clone(before), after...) {
		named = append(named, d.GetNodePoolQuotas())
	}
	for _, pool := range poolsNamed(named) {
		c, ok := capacity[pool]
		if !ok || !c.known {
			continue
		}
		for r := cluster.Resource(0); r < cluster.NumResources; r++ {
			l := load{
				sumBefore: sumDepartments(before, pool, r), sumAfter: sumDepartments(after, pool, r),
				availBefore: c.total.Get(r), availAfter: c.total.Get(r),
			}
			if l.worse() {
				msg := fmt.Sprintf("Node pool %s: departments would deserve %s, above the %s its Ready nodes have; lower a department's deserved quota or add nodes.",
					clusterproto.ID(pool), cluster.Quantity(r, l.sumAfter), cluster.FormatAmount(r, l.availAfter))
				return overSubscribed(pool, pool, r, l, msg)
			}
		}
	}
	return nil
}

func sumDepartments(ds []*quotav1.Department, pool string, r cluster.Resource) int64 {
	var sum int64
	for _, d := range ds {
		if v := clusterproto.QuotaIn(d.GetNodePoolQuotas(), pool, departmentBase(d.GetName())).Deserved.Get(r); v != cluster.Unlimited {
			sum += v
		}
	}
	return sum
}

// poolsNamed lists, sorted, the pools any of qs has an entry for: in a pool
// nobody lists every child has its default, which is 0 or unlimited, so
// nothing there can become over-subscribed.
func poolsNamed(qs [][]*quotav1.NodePoolQuota) []string {
	seen := map[string]bool{}
	for _, q := range qs {
		for _, e := range q {
			seen[e.GetNodePool()] = true
		}
	}
	return sortedKeys(seen)
}

// overSubscribed is the OVER_SUBSCRIBED error; the metadata repeats the
// values quoted in msg: amounts in GPUs, cores or GiB, as in the message.
func overSubscribed(parent, pool string, r cluster.Resource, l load, msg string) error {
	return apierr.FailedPrecondition(commonv1.ErrorReason_OVER_SUBSCRIBED, parent, msg).
		With("nodePool", pool).
		With("resource", r.String()).
		With("deserved", cluster.FormatAmount(r, l.sumAfter)).
		With("available", cluster.FormatAmount(r, l.availAfter))
}

// replaceNamed returns xs with the element named like x replaced by x, or x
// appended when xs has none (a create). Generic because projects and
// departments are summed alike.
func replaceNamed[T interface{ GetName() string }](xs []T, x T) []T {
	out := slices.Clone(xs)
	for i, y := range out {
		if y.GetName() == x.GetName() {
			out[i] = x
			return out
		}
	}
	return append(out, x)
}
