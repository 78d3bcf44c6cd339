package scheduling

import (
	"sort"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
)

// projectLine is one project's candidates for a pass, in the order of
// cluster.LessInProject; the head is list[0].
type projectLine struct {
	q    *cluster.Queue
	list []*cluster.Workload
}

// deptLine is a department's projects that have candidates, with the index of
// the one that goes first cached until something in the department changes.
type deptLine struct {
	q        *cluster.Queue
	projects []*projectLine
	best     int
}

// allocate runs the allocate pass (SCHEDULING.md §3): for each rank of pool
// preference, pool by pool in declaration order, pick the next workload by
// walking the queue tree and try to place it. It returns, in the order they
// were tried, the workloads still asking for pods after it.
func (c *cycle) allocate() []*cluster.Workload {
	var tried []*cluster.Workload
	seen := map[*cluster.Workload]bool{}
	next := c.waitingWorkloads()
	for rank := 0; len(next) > 0; rank++ {
		var retry []*cluster.Workload
		for _, p := range c.s.Pools {
			var cands []*cluster.Workload
			for _, w := range next {
				if c.poolAt(w, rank) == p {
					cands = append(cands, w)
				}
			}
			for _, w := range c.allocatePool(p, cands) {
				if !seen[w] {
					seen[w] = true
					tried = append(tried, w)
				}
				if w.PlacedPods() == 0 && rank+1 < len(w.Pools) {
					retry = append(retry, w)
				}
			}
		}
		next = retry
	}
	// Reclaim and preempt serve what is left: workloads below their minimum
	// and elastic ones whose next pod did not fit (SCHEDULING.md §3
	// "Elastic workloads in reclaim and preempt").
	var out []*cluster.Workload
	for _, w := range tried {
		if w.Wants() {
			out = append(out, w)
		}
	}
	return out
}

// poolAt is the pool w tries at a rank of preference: the pool its pods are
// in when it holds some, otherwise its rank-th listed pool.
func (c *cycle) poolAt(w *cluster.Workload, rank int) *cluster.Pool {
	if p := w.Pool(); p != nil {
		if rank == 0 {
			return p
		}
		return nil
	}
	if rank < len(w.Pools) {
		return c.s.Pool(w.Pools[rank])
	}
	return nil
}

// waitingWorkloads lists every workload with pods to place, in project
// creation order then submission order (the pass sorts them properly).
func (c *cycle) waitingWorkloads() []*cluster.Workload {
	var out []*cluster.Workload
	for _, q := range c.s.Projects() {
		start := len(out)
		for w := range q.Waiting() {
			if !w.Aside {
				out = append(out, w)
			}
		}
		part := out[start:]
		sort.Slice(part, func(i, j int) bool { return part[i].Seq < part[j].Seq })
	}
	return out
}

// allocatePool places what it can of cands in pool p and returns the
// workloads it could not place, in the order they were tried.
func (c *cycle) allocatePool(p *cluster.Pool, cands []*cluster.Workload) []*cluster.Workload {
	depts := c.lines(cands)
	var failed []*cluster.Workload
	var pick picker
	for {
		d := pick.dept(depts, p)
		if d == nil {
			return failed
		}
		pl := d.projects[d.best]
		w := pl.list[0]
		pl.list = pl.list[1:]
		d.best = -1
		c.on(StepAllocate, w)
		if !c.tryAllocate(w, p) {
			failed = append(failed, w)
			continue
		}
		if w.PlacedPods() < w.Pods {
			// Elastic: back into its project's order for one more pod.
			i := sort.Search(len(pl.list), func(i int) bool { return cluster.LessInProject(w, pl.list[i]) })
			pl.list = append(pl.list, nil)
			copy(pl.list[i+1:], pl.list[i:])
			pl.list[i] = w
		}
	}
}

func (c *cycle) lines(cands []*cluster.Workload) []*deptLine {
	byProject := map[*cluster.Queue]*projectLine{}
	for _, w := range cands {
		pl := byProject[w.Project]
		if pl == nil {
			pl = &projectLine{q: w.Project}
			byProject[w.Project] = pl
		}
		pl.list = append(pl.list, w)
	}
	var depts []*deptLine
	for _, d := range c.s.Departments {
		dl := &deptLine{q: d, best: -1}
		for _, q := range d.Children {
			if pl := byProject[q]; pl != nil {
				sort.Slice(pl.list, func(i, j int) bool { return cluster.LessInProject(pl.list[i], pl.list[j]) })
				dl.projects = append(dl.projects, pl)
			}
		}
		if len(dl.projects) > 0 {
			depts = append(depts, dl)
		}
	}
	return depts
}

// picker holds the picks' working memory from one pick to the next.
type picker struct {
	vs, projectVs []queueView
	ds            []*deptLine
	idx           []int
}

// dept walks the root's level: the department that goes first, with its
// first project cached in best. nil when nothing is left.
func (pk *picker) dept(depts []*deptLine, p *cluster.Pool) *deptLine {
	vs, ds := pk.vs[:0], pk.ds[:0]
	for _, d := range depts {
		if d.best < 0 {
			d.best = pk.project(d, p)
		}
		if d.best < 0 {
			continue
		}
		head := d.projects[d.best].list[0]
		vs = append(vs, view(d.q, p, request(head, p)))
		ds = append(ds, d)
	}
	pk.vs, pk.ds = vs, ds
	if len(ds) == 0 {
		return nil
	}
	return ds[best(vs)]
}

func (pk *picker) project(d *deptLine, p *cluster.Pool) int {
	vs, idx := pk.projectVs[:0], pk.idx[:0]
	for i, pl := range d.projects {
		if len(pl.list) == 0 {
			continue
		}
		vs = append(vs, view(pl.q, p, request(pl.list[0], p)))
		idx = append(idx, i)
	}
	pk.projectVs, pk.idx = vs, idx
	if len(idx) == 0 {
		return -1
	}
	return idx[best(vs)]
}

// tryAllocate places w's next pods in p if allocate's checks pass.
func (c *cycle) tryAllocate(w *cluster.Workload, p *cluster.Pool) bool {
	if r := checkQuota(w, p, request(w, p)); r.Check != 0 {
		c.because(w, p, r)
		return false
	}
	// Placing only ever takes room, so a shape that did not fit still does
	// not until something is evicted: skip the search, keep its reason.
	key := shapeOf(w, p)
	if miss, ok := c.noFit[key]; ok && miss.freed == c.freed {
		c.because(w, p, miss.why)
		return false
	}
	pods, miss := placement.Place(c.s, p, w, w.NextPods(), c.cfg.Placement)
	if pods == nil {
		why := Reason{Check: missChecks[miss.Kind], Requested: miss.Requested, Available: miss.Largest, Nodes: miss.Nodes, Text: miss.Text}
		c.noFit[key] = noFit{why: why, freed: c.freed}
		c.because(w, p, why)
		return false
	}
	c.bind(w, pods)
	return true
}

// shape is everything placement reads of a workload: two workloads of one
// shape fit, or do not, in the same places.
type shape struct {
	pool     *cluster.Pool
	pod      cluster.PodRequest
	lead     cluster.PodRequest // pod 0's, while it is to be placed (Workload.Lead)
	pods     int
	nodeType string
}

func shapeOf(w *cluster.Workload, p *cluster.Pool) shape {
	sh := shape{pool: p, pod: w.Pod, pods: w.NextPods(), nodeType: w.NodeType}
	if w.Lead != nil && w.Placed[0].Node == nil {
		sh.lead = *w.Lead
	}
	return sh
}

// noFit remembers a shape that did not fit, and when.
type noFit struct {
	why   Reason
	freed int // cycle.freed then
}

// missChecks are the checks placement's misses fail.
var missChecks = map[placement.MissKind]Check{
	placement.NoReadyNode:    CheckNodePool,
	placement.NoNodeOfType:   CheckNodeType,
	placement.NoNodeOfRole:   CheckNodeType, // a role narrows the nodes as a type does; the text names it
	placement.NoRoom:         CheckCapacity,
	placement.NotAllTogether: CheckGang,
}
