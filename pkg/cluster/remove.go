package cluster

import (
	"slices"
	"sort"

	"github.com/runwayhq/runway/pkg/fairshare"
)

// Removals undo additions in place, so that a store following deletions
// (a node, queue or pool gone) changes the State by what was deleted
// instead of building a new one. What a removal takes with it (a node's
// pods, a project's workloads) is returned for the caller to add back once
// it can be (its node, project or pool back). Removals are not recorded in
// the undo log: they are not a cycle's tentative changes.

// RemoveNode deletes a node; its pods are taken off first and returned.
func (s *State) RemoveNode(n *Node) []PodRef {
	lost := append([]PodRef(nil), n.Pods...)
	for _, ref := range lost {
		s.unplace(ref.Workload, ref.Pod)
	}
	p := n.Pool
	for _, m := range p.Nodes {
		p.unindexNode(m)
	}
	p.Nodes = slices.Delete(p.Nodes, n.rank, n.rank+1)
	for r, m := range p.Nodes {
		m.rank = r
		p.indexNode(m)
	}
	delete(s.nodes, n.Name)
	s.countRoles(n.Roles, -1)
	p.recompute()
	return lost
}

// RemoveQueue deletes a project, or a department with its projects, with
// their workloads (freeing what they hold). It returns the projects and
// the workloads removed, in creation and submission order.
func (s *State) RemoveQueue(q *Queue) (projects []*Queue, workloads []*Workload) {
	projects = []*Queue{q}
	if q.Kind == Department {
		projects = append([]*Queue(nil), q.Children...)
	}
	gone := map[*Queue]bool{}
	for _, p := range projects {
		gone[p] = true
	}
	workloads = s.removeWorkloads(func(w *Workload) bool { return gone[w.Project] })
	for _, p := range projects {
		delete(s.queues, p.Name)
		p.Parent.Children = slices.DeleteFunc(p.Parent.Children, func(c *Queue) bool { return c == p })
	}
	s.projects = slices.DeleteFunc(s.projects, func(p *Queue) bool { return gone[p] })
	if q.Kind == Department {
		delete(s.queues, q.Name)
		s.Departments = slices.DeleteFunc(s.Departments, func(d *Queue) bool { return d == q })
	}
	return projects, workloads
}

// RemovePool deletes a pool, its nodes (whose pods are returned) and the
// workloads that name it; the later pools' indexes, and every queue's
// per-pool entries, close the gap. The pool "default" always exists: it
// keeps its nodes and workloads, and its setting goes back to none.
func (s *State) RemovePool(p *Pool) (lost []PodRef, workloads []*Workload, nodes []*Node) {
	if p.Name == "default" {
		p.TimeBased = fairshare.TimeBased{}
		return nil, nil, nil
	}
	nodes = append([]*Node(nil), p.Nodes...)
	for _, n := range nodes {
		lost = append(lost, s.RemoveNode(n)...)
	}
	workloads = s.removeWorkloads(func(w *Workload) bool { return slices.Contains(w.Pools, p.Name) })
	i := p.Index
	s.Pools = slices.Delete(s.Pools, i, i+1)
	for j := i; j < len(s.Pools); j++ {
		s.Pools[j].Index = j
	}
	delete(s.pools, p.Name)
	for _, q := range s.queues {
		q.Quotas = slices.Delete(q.Quotas, i, i+1)
		q.Usage = slices.Delete(q.Usage, i, i+1)
		q.FairShare = slices.Delete(q.FairShare, i, i+1)
		q.Decayed = slices.Delete(q.Decayed, i, i+1)
		q.Adjusted = slices.Delete(q.Adjusted, i, i+1)
	}
	return lost, workloads, nodes
}

// removeWorkloads removes the workloads that match and returns them in
// submission order.
func (s *State) removeWorkloads(match func(*Workload) bool) []*Workload {
	var out []*Workload
	for _, w := range s.workloads {
		if match(w) {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	for _, w := range out {
		s.Remove(w)
	}
	return out
}
