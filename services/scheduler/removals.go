package scheduler

import (
	"sort"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// Deletions the cache applies in place (cluster.State's removals): what a
// removal takes with it is marked dirty, and comes back through sync once
// what it needs is stored again, as an addition would.

// removePool takes a deleted pool off the state with what needs it: its
// nodes, the workloads that name it, and the queues whose quotas do; they
// come back once it is there again.
func (c *Cache) removePool(p *cluster.Pool) {
	depts := queuesNaming(c.departments, p.Name, func(d *quotav1.Department) map[string]cluster.Quota {
		_, quotas := clusterproto.DepartmentQueue(d)
		return quotas
	})
	projects := queuesNaming(c.projects, p.Name, func(p *quotav1.Project) map[string]cluster.Quota {
		_, _, quotas := clusterproto.ProjectQueue(p)
		return quotas
	})
	for k, ids := range map[kind][]string{kindDepartment: depts, kindProject: projects} {
		for _, id := range ids {
			if q := c.state.Queue(id); q != nil {
				c.removeQueue(q)
				c.dirty[k][id] = true
			}
		}
	}
	lost, removed, nodes := c.state.RemovePool(p)
	c.requeueLost(lost)
	c.resubmit(removed)
	for _, n := range nodes {
		c.dirty[kindNode][n.Name] = true
	}
}

// queuesNaming are the stored queues whose quotas name pool, sorted.
func queuesNaming[T any](stored map[string]T, pool string, quotas func(T) map[string]cluster.Quota) []string {
	var out []string
	for id, q := range stored {
		if _, ok := quotas(q)[pool]; ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// removeQueue takes a deleted (or moved) queue off the state, with its
// projects and their workloads, which come back once they can: the
// projects when their department is there, the workloads (and their
// bindings) with their project.
func (c *Cache) removeQueue(q *cluster.Queue) {
	projects, removed := c.state.RemoveQueue(q)
	if q.Kind == cluster.Department {
		for _, p := range projects {
			c.dirty[kindProject][p.Name] = true
		}
	}
	c.resubmit(removed)
}

// resubmit marks workloads the state removed with what they belonged to
// dirty: syncWorkload submits each again once its project and pools are
// there (and marks its bindings).
func (c *Cache) resubmit(removed []*cluster.Workload) {
	for _, w := range removed {
		delete(c.submitted, w.ID)
		c.dirty[kindWorkload][w.ID] = true
	}
}

// requeueLost sends back to Pending the workloads left without a placed
// pod by pods taken off a node that went.
func (c *Cache) requeueLost(lost []cluster.PodRef) {
	for _, ref := range lost {
		if w := ref.Workload; w.PlacedPods() == 0 && c.state.Workload(w.ID) == w {
			scheduling.Requeue(c.state, w)
		}
	}
}
