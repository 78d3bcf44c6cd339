package scenario

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"time"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/placement"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// maxSettleCycles bounds `run` without a count ("until nothing changes").
const maxSettleCycles = 10000

// Options tune a run.
type Options struct {
	// Progress receives a line about once a second while a replay is played
	// and has run for more than a second; nil for none.
	Progress io.Writer
	// Clock reads wall time for progress lines only (never for decisions).
	Clock func() time.Time
}

// Failure is an expectation that did not hold.
type Failure struct {
	Line int
	Msg  string
}

// Result is what a run produced.
type Result struct {
	Output   Output
	Failures []Failure
}

// runner plays a scenario on a virtual clock through the real scheduler.
type runner struct {
	sc    *Scenario
	opts  Options
	s     *cluster.State
	cfg   scheduling.Config
	now   time.Duration
	cycle time.Duration

	spec     map[*cluster.Workload]Submit   // as submitted: its duration
	timed    map[*cluster.Workload]struct{} // not finished, with a duration
	ran      map[*cluster.Workload]time.Duration
	arrivals []arrival // future replay submissions, by time
	replays  []string  // trace names being played, for progress lines

	out      Output
	failures []Failure
	metrics  metrics
	lastLine time.Time
	started  time.Time
}

type arrival struct {
	at  time.Duration
	sub Submit
}

// Run plays sc and returns its output and the expectations that failed. An
// error means the file asked for something impossible at run time (named with
// its line).
func Run(sc *Scenario, opts Options) (*Result, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	st, err := placement.ParseStrategy(sc.Config.Placement)
	if err != nil {
		return nil, &FileError{File: sc.Path, Line: 1, Msg: err.Error()}
	}
	r := &runner{
		sc: sc, opts: opts, s: cluster.New(),
		cycle: sc.Config.Cycle,
		spec:  map[*cluster.Workload]Submit{},
		timed: map[*cluster.Workload]struct{}{},
		ran:   map[*cluster.Workload]time.Duration{},
		out:   Output{Scenario: sc.Name, Snapshots: []Snapshot{}},
	}
	if r.cycle <= 0 {
		r.cycle = time.Second
	}
	r.cfg = scheduling.DefaultConfig()
	r.cfg.Placement = st
	if err := r.build(); err != nil {
		return nil, err
	}
	for _, a := range sc.Actions {
		if err := r.do(a); err != nil {
			return nil, &FileError{File: sc.Path, Line: a.Line, Msg: err.Error()}
		}
	}
	r.out.Metrics = r.metrics.result(r.now)
	return &Result{Output: r.out, Failures: r.failures}, nil
}

func (r *runner) build() error {
	for _, p := range r.sc.NodePools {
		r.s.AddPool(p).TimeBased = r.sc.TimeBased[p]
	}
	for _, n := range r.sc.Nodes {
		_, err := r.s.AddNode(cluster.NodeSpec{
			Name: n.Name, Pool: n.Pool, GPUs: n.GPUs,
			GPUMemory: cluster.BytesFromGiB(n.GPUMemoryGiB),
			CPU:       cluster.MilliFromFloat(n.CPU), Memory: cluster.BytesFromGiB(n.MemoryGiB),
			Labels: n.Labels,
		})
		if err != nil {
			return &FileError{File: r.sc.Path, Line: n.Line, Msg: err.Error()}
		}
	}
	for _, d := range r.sc.Departments {
		if _, err := r.s.AddDepartment(d.Name, quotas(d.Quota)); err != nil {
			return &FileError{File: r.sc.Path, Line: d.Line, Msg: err.Error()}
		}
	}
	for _, p := range r.sc.Projects {
		if _, err := r.s.AddProject(p.Name, p.Department, quotas(p.Quota)); err != nil {
			return &FileError{File: r.sc.Path, Line: p.Line, Msg: err.Error()}
		}
	}
	return nil
}

func quotas(pqs []PoolQuota) map[string]cluster.Quota {
	out := map[string]cluster.Quota{}
	for _, pq := range pqs {
		out[pq.Pool] = quota(pq.Quota)
	}
	return out
}

func quota(q Quota) cluster.Quota {
	limit := int64(cluster.Unlimited)
	if q.Limit >= 0 {
		limit = cluster.MilliFromFloat(q.Limit)
	}
	cpu := int64(cluster.Unlimited)
	if q.CPU >= 0 {
		cpu = cluster.MilliFromFloat(q.CPU)
	}
	return cluster.Quota{
		Deserved:  cluster.Resources{GPU: cluster.MilliFromFloat(q.GPU), CPU: cpu, Memory: cluster.BytesFromGiB(q.MemoryGiB)},
		Limit:     cluster.Resources{GPU: limit, CPU: cluster.Unlimited, Memory: cluster.Unlimited},
		Weight:    cluster.SameWeights(q.OverQuotaWeight),
		OverQuota: q.OverQuota,
	}
}

func (r *runner) do(a Action) error {
	switch a.Kind {
	case ActionSubmit:
		for _, sub := range a.Submits {
			if err := r.submit(sub); err != nil {
				return err
			}
		}
	case ActionRun:
		r.run(a.Run)
	case ActionAdvance:
		r.advance(a.Advance)
	case ActionComplete, ActionFail, ActionDelete:
		return r.finish(a.Kind, a.Target)
	case ActionNodeDown, ActionNodeUp:
		return r.nodeState(a.Target, a.Kind == ActionNodeUp)
	case ActionReplay:
		return r.replay(a.Replay)
	case ActionSnapshot:
		r.out.Snapshots = append(r.out.Snapshots, r.snapshot(a.Snapshot))
	case ActionExpect:
		r.expect(a.Expect)
	}
	return nil
}

func (r *runner) submit(sub Submit) error { return r.submitAt(sub, r.now) }

// submitAt submits at a given time: a replay job arrives at its own time even
// when the clock has already passed it within a tick.
func (r *runner) submitAt(sub Submit, at time.Duration) error {
	prio := cluster.DefaultPriority(sub.Type)
	if sub.Priority != "" {
		var err error
		if prio, err = cluster.PriorityByName(sub.Priority); err != nil {
			return err
		}
	}
	req := cluster.PodRequest{CPU: cluster.MilliFromFloat(sub.CPU), Memory: cluster.BytesFromGiB(sub.MemoryGiB)}
	if sub.GPUMemoryGiB > 0 {
		req.GPUMemory = cluster.BytesFromGiB(sub.GPUMemoryGiB)
	} else {
		req.GPU = cluster.MilliFromFloat(sub.GPU)
	}
	w, err := r.s.Submit(cluster.WorkloadSpec{
		ID: sub.Name, Name: sub.Name, Project: sub.Project, Type: sub.Type, Priority: prio,
		Pods: sub.Pods, MinPods: sub.MinPods, Pod: req, Pools: sub.Pools, NodeType: sub.NodeType,
		Submitted: at,
	})
	if err != nil {
		return err
	}
	r.spec[w] = sub
	if sub.Duration > 0 {
		r.timed[w] = struct{}{}
	}
	r.metrics.submitted++
	return nil
}

// run plays n cycles, or until a cycle changes nothing when n is 0.
func (r *runner) run(n int) {
	if n > 0 {
		for i := 0; i < n; i++ {
			r.step()
			r.tick(r.cycle)
		}
		return
	}
	for i := 0; i < maxSettleCycles; i++ {
		changed := r.step()
		r.tick(r.cycle)
		if !changed {
			return
		}
	}
}

// advance moves the clock by d, running a cycle after every `cycle`. Where a
// cycle changed nothing and nothing happens before the next event, the clock
// jumps to it: the same state would give the same empty plan. Not while work
// waits in a pool with time-based fair share: there the fair shares move with
// the clock, and any cycle may place or reclaim.
func (r *runner) advance(d time.Duration) {
	end := r.now + d
	changed := true
	for r.now < end {
		dt := r.cycle
		if !changed && !r.waitsOnTime() {
			if next, ok := r.nextEvent(); !ok || next > r.now {
				k := time.Duration(1)
				if ok {
					k = max(1, (next-r.now)/r.cycle)
				} else {
					k = (end - r.now) / r.cycle
				}
				dt = k * r.cycle
			}
		}
		dt = min(dt, end-r.now)
		r.tick(dt)
		changed = r.step()
		r.progress()
	}
}

// step runs one scheduling cycle and applies its plan.
func (r *runner) step() bool {
	r.cfg.Now = r.now
	plan := scheduling.Cycle(r.s, r.cfg)
	for _, e := range plan.Evictions {
		// A consolidation move is bound again in the same plan: not a preemption.
		if w := r.s.Workload(e.Workload); w != nil && e.Rule != scheduling.RuleConsolidation && (e.Pods == nil || len(e.Pods) == w.PlacedPods()) {
			r.metrics.preemptions++
		}
	}
	if err := scheduling.Apply(r.s, plan, r.now); err != nil {
		panic("scenario: a plan from the scheduler did not apply: " + err.Error())
	}
	for _, b := range plan.Bindings {
		if w := r.s.Workload(b.Workload); w != nil && w.FirstRunning == r.now && w.Phase == cluster.Running {
			r.metrics.started(w)
		}
	}
	return !plan.Empty()
}

// tick moves the clock by dt: queues accrue what they held as usage (pools
// with time-based fair share), running workloads accumulate run time and
// those that reach their duration complete; replay jobs due by then are
// submitted.
func (r *runner) tick(dt time.Duration) {
	r.metrics.integrate(r.s, dt)
	scheduling.AccrueUsage(r.s, dt)
	r.now += dt
	for _, w := range r.runningTimed() {
		r.ran[w] += dt
		if r.ran[w] >= r.spec[w].Duration {
			r.s.Finish(w, cluster.Completed)
			delete(r.timed, w)
		}
	}
	for len(r.arrivals) > 0 && r.arrivals[0].at <= r.now {
		a := r.arrivals[0]
		r.arrivals = r.arrivals[1:]
		if err := r.submitAt(a.sub, a.at); err != nil {
			panic("scenario: replay submit: " + err.Error())
		}
	}
}

// waitsOnTime reports whether a workload waits for a pool with time-based
// fair share.
func (r *runner) waitsOnTime() bool {
	if len(r.sc.TimeBased) == 0 {
		return false
	}
	for _, q := range r.s.Projects() {
		for w := range q.Waiting() {
			for _, p := range w.Pools {
				if r.s.Pool(p).TimeBased.On() {
					return true
				}
			}
		}
	}
	return false
}

// runningTimed lists running workloads with a duration, in submission order.
func (r *runner) runningTimed() []*cluster.Workload {
	var out []*cluster.Workload
	for w := range r.timed {
		if w.Phase == cluster.Running {
			out = append(out, w)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// nextEvent is the earliest time something happens by itself: a completion,
// a replay arrival, or a gang-minimum timeout.
func (r *runner) nextEvent() (time.Duration, bool) {
	next, ok := time.Duration(math.MaxInt64), false
	for w := range r.timed {
		if w.Phase == cluster.Running {
			next, ok = min(next, r.now+r.spec[w].Duration-r.ran[w]), true
		}
	}
	if len(r.arrivals) > 0 {
		next, ok = min(next, r.arrivals[0].at), true
	}
	for _, w := range r.s.BelowMinimum() {
		if w.BelowMinSince >= 0 {
			next, ok = min(next, w.BelowMinSince+r.cfg.GangTimeout), true
		}
	}
	return next, ok
}

func (r *runner) finish(kind ActionKind, name string) error {
	w := r.s.Workload(name)
	if w == nil {
		return fmt.Errorf("%s: workload %q does not exist", kind, name)
	}
	switch kind {
	case ActionComplete:
		r.s.Finish(w, cluster.Completed)
	case ActionFail:
		r.s.Finish(w, cluster.Failed)
	default:
		r.s.Remove(w)
		delete(r.spec, w)
		delete(r.ran, w)
	}
	delete(r.timed, w)
	return nil
}

func (r *runner) nodeState(name string, up bool) error {
	n := r.s.Node(name)
	if n == nil {
		return fmt.Errorf("node %q does not exist", name)
	}
	for _, ref := range r.s.SetReady(n, up) {
		if ref.Workload.PlacedPods() == 0 && ref.Workload.Phase == cluster.Running {
			scheduling.Requeue(r.s, ref.Workload)
			r.metrics.preemptions++
		}
	}
	r.s.StampBelowMinimum(r.now)
	return nil
}

func (r *runner) progress() {
	if r.opts.Progress == nil || len(r.replays) == 0 {
		return
	}
	now := r.opts.Clock()
	if now.Sub(r.started) < time.Second || now.Sub(r.lastLine) < time.Second {
		return
	}
	r.lastLine = now
	running, pending := 0, 0
	for _, w := range r.s.Workloads() {
		switch w.Phase {
		case cluster.Running:
			running++
		case cluster.Pending:
			pending++
		}
	}
	fmt.Fprintf(r.opts.Progress, "replay %s: at %s, %d jobs submitted, %d to come, %d running, %d pending\n",
		filepath.Base(r.replays[0]), FormatClock(r.now), r.metrics.submitted, len(r.arrivals), running, pending)
}
