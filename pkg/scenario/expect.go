package scenario

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// numberTolerance is how close queue and cluster numbers must be (FORMAT.md).
const numberTolerance = 0.01

// expect checks e against the state now; each failed check is one Failure.
func (r *runner) expect(e *Expect) {
	scheduling.ComputeFairShares(r.s)
	before := len(r.failures)
	fail := func(line int, format string, args ...any) {
		r.failures = append(r.failures, Failure{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	for _, list := range []struct {
		names []string
		want  cluster.Phase
	}{{e.Running, cluster.Running}, {e.Pending, cluster.Pending}, {e.Completed, cluster.Completed}, {e.Failed, cluster.Failed}} {
		for _, name := range list.names {
			w := r.s.Workload(name)
			switch {
			case w == nil:
				fail(e.Line, "workload %s: want %s, it does not exist (deleted or never submitted)", name, list.want)
			case w.Phase != list.want:
				fail(e.Line, "workload %s: want %s, got %s%s", name, list.want, w.Phase, r.why(w))
			}
		}
	}
	for _, we := range e.Workloads {
		r.expectWorkload(we, fail)
	}
	for _, qe := range e.Queues {
		r.expectQueue(qe, fail)
	}
	if c := e.Cluster; c != nil {
		got := r.clusterState()
		checkNumber(fail, e.Line, "cluster gpus", c.GPUs, got.GPUs)
		checkNumber(fail, e.Line, "cluster allocatedGpus", c.AllocatedGPUs, got.AllocatedGPUs)
	}
	if len(r.failures) == before {
		r.out.Expectations.Passed++
	} else {
		r.out.Expectations.Failed++
	}
}

// why adds the scheduler's reasons for a waiting workload to a failure.
func (r *runner) why(w *cluster.Workload) string {
	if w.Phase != cluster.Pending {
		return ""
	}
	r.cfg.Now = r.now
	for _, wt := range scheduling.Cycle(r.s, r.cfg).Waiting {
		if wt.Workload == w.ID {
			return " (" + strings.Join(scheduling.Texts(wt.Reasons), "; ") + ")"
		}
	}
	return ""
}

func (r *runner) expectWorkload(we WorkloadExpect, fail func(int, string, ...any)) {
	w := r.s.Workload(we.Name)
	if w == nil {
		fail(we.Line, "workload %s: it does not exist (deleted or never submitted)", we.Name)
		return
	}
	got := workloadState(w)
	if we.Status != nil && *we.Status != got.Status {
		fail(we.Line, "workload %s: status: want %s, got %s%s", we.Name, *we.Status, got.Status, r.why(w))
	}
	if we.Project != nil && *we.Project != got.Project {
		fail(we.Line, "workload %s: project: want %s, got %s", we.Name, *we.Project, got.Project)
	}
	checkInt := func(field string, want *int, got int) {
		if want != nil && *want != got {
			fail(we.Line, "workload %s: %s: want %d, got %d", we.Name, field, *want, got)
		}
	}
	checkInt("pods", we.Pods, got.Pods)
	checkInt("runningPods", we.RunningPods, got.RunningPods)
	checkInt("preemptions", we.Preemptions, got.Preemptions)
	checkNumber(fail, we.Line, "workload "+we.Name+": gpu", we.GPU, got.GPU)
	if we.Nodes != nil {
		want := slices.Clone(*we.Nodes)
		slices.Sort(want)
		if !slices.Equal(want, got.Nodes) {
			fail(we.Line, "workload %s: nodes: want %v, got %v", we.Name, want, got.Nodes)
		}
	}
}

func (r *runner) expectQueue(qe QueueExpect, fail func(int, string, ...any)) {
	q := r.s.Queue(qe.Name)
	if q == nil {
		fail(qe.Line, "queue %s: it does not exist", qe.Name)
		return
	}
	if r.s.Pool(qe.Pool) == nil {
		fail(qe.Line, "queue %s: node pool %s does not exist", qe.Name, qe.Pool)
		return
	}
	got := r.queueState(q).Pools[qe.Pool]
	prefix := "queue " + qe.Name + " in pool " + qe.Pool + ": "
	checkNumber(fail, qe.Line, prefix+"deserved", qe.Deserved, got.Deserved)
	checkNumber(fail, qe.Line, prefix+"fairShare", qe.FairShare, got.FairShare)
	checkNumber(fail, qe.Line, prefix+"allocated", qe.Allocated, got.Allocated)
	checkNumber(fail, qe.Line, prefix+"requested", qe.Requested, got.Requested)
}

func checkNumber(fail func(int, string, ...any), line int, what string, want *float64, got float64) {
	if want != nil && math.Abs(*want-got) > numberTolerance {
		fail(line, "%s: want %g, got %g", what, *want, got)
	}
}
