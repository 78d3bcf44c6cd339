package scheduling

import (
	"fmt"

	"github.com/runwayhq/runway/pkg/cluster"
)

// request is what w asks for now in pool p: NextPods pods, a pending GPU-memory
// request counted against the pool's smallest device (SCHEDULING.md §1).
func request(w *cluster.Workload, p *cluster.Pool) cluster.Resources {
	return w.NextRequest(p.MinDeviceMemory)
}

// checkQuota runs allocate's checks for adding req of w in pool p: the project
// and each ancestor stay within their limit, and a non-preemptible workload
// keeps their non-preemptible allocation within deserved. It returns the
// zero Reason when they pass, otherwise the first failure with its numbers.
func checkQuota(w *cluster.Workload, p *cluster.Pool, req cluster.Resources) Reason {
	return quotaChecks(w, p, req, true)
}

// quotaChecks runs the limit checks (at every level, or at the project's only
// when ancestorLimits is false) and the non-preemptible checks at every level.
func quotaChecks(w *cluster.Workload, p *cluster.Pool, req cluster.Resources, ancestorLimits bool) Reason {
	for q := w.Project; q != nil; q = q.Parent {
		quota := q.Quotas[p.Index]
		u := q.Usage[p.Index]
		for r := cluster.Resource(0); r < cluster.NumResources; r++ {
			need := req.Get(r)
			if need == 0 {
				continue
			}
			if l := quota.EffectiveLimit(r); (ancestorLimits || q == w.Project) && l != cluster.Unlimited && u.Allocated.Get(r)+need > l {
				what := "limit"
				if !quota.OverQuota && l == quota.Deserved.Get(r) {
					what = "quota (over-quota is off)"
				}
				return Reason{Check: CheckLimit, Queue: queueName(q), Requested: req,
					Available: underCap(r, l, u.Allocated.Get(r)), Text: fmt.Sprintf("%s %s would hold %s, above its %s of %s",
						q.Kind, q.Name, cluster.Quantity(r, u.Allocated.Get(r)+need), what, cluster.FormatAmount(r, l))}
			}
			if w.Priority.Preemptible {
				continue
			}
			if d := quota.Deserved.Get(r); d != cluster.Unlimited && u.NonPreemptible.Get(r)+need > d {
				return Reason{Check: CheckNonPreemptibleDeserved, Queue: queueName(q), Requested: req,
					Available: underCap(r, d, u.NonPreemptible.Get(r)), Text: fmt.Sprintf(
						"non-preemptible workloads of %s %s would hold %s, above its deserved quota of %s",
						q.Kind, q.Name, cluster.Quantity(r, u.NonPreemptible.Get(r)+need), cluster.FormatAmount(r, d))}
			}
		}
	}
	return Reason{}
}

// underCap is what is left of resource r under cap after held (never below 0).
func underCap(r cluster.Resource, cap, held int64) cluster.Resources {
	return cluster.Resources{}.Set(r, max(cap-held, 0))
}

// queueName is a queue's resource name, "projects/{p}" or "departments/{d}".
func queueName(q *cluster.Queue) string {
	if q.Kind == cluster.Department {
		return "departments/" + q.Name
	}
	return "projects/" + q.Name
}

// checkOwnQuota is the part of checkQuota that evicting other projects'
// preemptible workloads cannot change: j's project's limit, and the
// non-preemptible checks at every level. (A department's limit can be lifted
// by victims of the department's other projects.)
func checkOwnQuota(w *cluster.Workload, p *cluster.Pool, req cluster.Resources) Reason {
	return quotaChecks(w, p, req, false)
}
