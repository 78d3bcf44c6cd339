package scenario

import (
	"fmt"
	"math"
	"sort"

	"github.com/runwayhq/runway/pkg/cluster"
)

// replay registers a trace's jobs to be submitted at their own times,
// counted from now: those due now are submitted at once, the rest as later
// `run` and `advance` actions move the clock.
//
// Where FORMAT.md is silent: a job asking for more GPUs than the pool's
// largest node becomes a gang of equal pods, each the largest divisor of its
// GPUs that fits one node (16 GPUs on 8-GPU nodes: 2 pods of 8); auto
// projects are created in the order the trace first names their queues.
func (r *runner) replay(rp *Replay) error {
	jobs, err := ReadTrace(rp.File)
	if err != nil {
		return err
	}
	pool := r.s.Pool(rp.Pool)
	if pool == nil {
		return fmt.Errorf("replay: node pool %q does not exist", rp.Pool)
	}
	if rp.Projects == "auto" {
		if err := r.autoProjects(jobs, pool, rp.OverQuota); err != nil {
			return err
		}
	}
	perNode := 0
	for _, n := range pool.Nodes {
		perNode = max(perNode, len(n.Devices))
	}
	start := r.now
	for _, j := range jobs {
		sub := Submit{Name: j.ID, Project: j.Queue, Type: rp.Type, Pods: 1, MinPods: 1,
			Pools: []string{rp.Pool}, Duration: j.Duration, GPU: j.GPUs, Line: rp.Line}
		if j.GPUs > 1 {
			whole := int(math.Round(j.GPUs))
			per := podSize(whole, perNode)
			sub.GPU, sub.Pods, sub.MinPods = float64(per), whole/per, whole/per
		}
		r.arrivals = append(r.arrivals, arrival{at: start + j.Submit, sub: sub})
	}
	sort.SliceStable(r.arrivals, func(i, j int) bool { return r.arrivals[i].at < r.arrivals[j].at })
	r.replays = append(r.replays, rp.File)
	r.started = r.opts.Clock()
	for len(r.arrivals) > 0 && r.arrivals[0].at <= r.now {
		a := r.arrivals[0]
		r.arrivals = r.arrivals[1:]
		if err := r.submitAt(a.sub, a.at); err != nil {
			return err
		}
	}
	return nil
}

// podSize is the largest divisor of gpus that fits a node of perNode GPUs.
func podSize(gpus, perNode int) int {
	if perNode <= 0 || gpus <= perNode {
		return gpus
	}
	for d := perNode; d > 1; d-- {
		if gpus%d == 0 {
			return d
		}
	}
	return 1
}

func (r *runner) autoProjects(jobs []TraceJob, pool *cluster.Pool, overQuota bool) error {
	var queues []string
	seen := map[string]bool{}
	for _, j := range jobs {
		if !seen[j.Queue] {
			seen[j.Queue] = true
			queues = append(queues, j.Queue)
		}
	}
	if len(queues) == 0 {
		return nil
	}
	share := math.Floor(float64(pool.Total.GPU) / 1000 / float64(len(queues)))
	for _, name := range queues {
		if r.s.Queue(name) != nil {
			continue
		}
		q := cluster.DefaultQuota()
		q.Deserved.GPU = cluster.MilliFromFloat(share)
		q.OverQuota = overQuota
		if _, err := r.s.AddProject(name, "", map[string]cluster.Quota{pool.Name: q}); err != nil {
			return err
		}
	}
	return nil
}
