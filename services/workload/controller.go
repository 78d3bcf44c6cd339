package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Controller folds what the other services write into each workload's
// status, so that the workloads prefix keeps one writer (this service):
//
//   - bindings (`bindings/{node}/{project}.{workload}.{pod}`, the
//     scheduler's): newly bound pods fold SCHEDULED (still PENDING, with
//     the reason STARTING, until min pods are reported running);
//     status.pods, nodes, node_pool (the nodes' pool, from `nodes/`) and the allocated GPUs, CPU and memory
//     (the spec's per pod) follow the bound set; a workload whose bindings are all
//     gone without an event is Released (STOPPED when suspended);
//   - evictions (`evictions/{project}/{workload}/{unixnano}-{n}`, PREEMPTED
//     events of the scheduler): folded as they are, and the eviction key is
//     deleted in the same transaction as the workload write, so each is
//     folded exactly once;
//   - pending reasons (`reasons/{project}/{workload}`, the scheduler's
//     record of why a waiting workload was not placed): folded into a
//     PENDING workload's status.pending_reasons by FoldReasons; they are
//     cleared when it is scheduled, stopped or finished (Fold);
//   - run reports (`runs/{node}/{project}.{workload}.{pod}`, the node
//     agents'): pods reported RUNNING fold STARTED (RUNNING once min
//     pods run, as Fold defines: bound is not running); once every bound pod
//     (at least the requested pods) has ended, FINISHED (COMPLETED when
//     every pod exited 0, FAILED otherwise). A report counts only when it
//     is newer than its pod's binding (ModRevision > the binding's
//     ModRevision, which a consolidation move on the same node rewrites),
//     so a report of an earlier placement is ignored.
//
// The controller keeps a model of those prefixes (and nodes/, for the
// pools) fed by one watch over the key range that holds them all, so the
// model is always etcd as of one revision: the streams can never be seen
// out of step (model.go). Each change marks the workloads it concerns, and
// only those are reconciled, from the model, with no read of etcd: the
// work is proportional to what changed. A reconcile compares the result
// with the stored status, so re-running it (a restart, a retried
// conflict) adds no event. Writes are conditional on the workload key's
// revision; a conflict waits for the watch to bring the newer value.
//
// Run reports are collected once they no longer count (their binding is
// gone, or newer than them), in the transaction of the workload they
// belong to, so runs/ does not grow with every pod ever run.
//
// Scheduling limits (Workload.limits) are enforced here too: a RUNNING
// workload whose running time or GPU idle time reaches its limit gets
// spec.suspended set, stop_reason and a LIMIT_REACHED event, so that the
// scheduler releases its pods as for any suspension; with preempt_when_idle
// and a preemptible priority it is marked requeue_on_release and returns to
// PENDING once released. Time passes without any watch event, so the
// running workloads that have limits (and only those) are also reconciled
// every LimitCheckInterval.
type Controller struct {
	client *clientv3.Client
	log    *slog.Logger
	clock  Clock
	every  time.Duration
	reg    prometheus.Registerer
	// skipped counts and logs (once) stored values that do not decode: a
	// bad value is left alone, never a reason to stop reconciling others.
	skipped     *etcdstore.SkipLog
	undecodable *prometheus.CounterVec
}

// DefaultLimitCheckInterval is how often the controller checks the time
// and idle-GPU limits of running workloads when nothing else changes.
const DefaultLimitCheckInterval = 5 * time.Second

// ControllerOption tunes a Controller.
type ControllerOption func(*Controller)

// WithLimitCheckInterval sets how often limits are checked without events
// (tests use a short one with a virtual clock).
func WithLimitCheckInterval(d time.Duration) ControllerOption {
	return func(c *Controller) { c.every = d }
}

// WithRegisterer registers the controller's metrics on reg.
func WithRegisterer(reg prometheus.Registerer) ControllerOption {
	return func(c *Controller) { c.reg = reg }
}

// NewController returns a controller over deps.Client (deps.Projects is
// not used).
func NewController(deps Deps, opts ...ControllerOption) (*Controller, error) {
	if deps.Client == nil {
		return nil, errors.New("workload: Deps.Client is nil")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Clock == nil {
		deps.Clock = systemClock{}
	}
	c := &Controller{client: deps.Client, log: deps.Logger, clock: deps.Clock, every: DefaultLimitCheckInterval}
	for _, o := range opts {
		o(c)
	}
	c.undecodable = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runway_workload_controller_undecodable_values_total",
		Help: "Stored values the workload status controller skipped because they do not decode, by key prefix."}, []string{"prefix"})
	if c.reg != nil {
		if err := c.reg.Register(c.undecodable); err != nil {
			return nil, err
		}
	}
	c.skipped = etcdstore.NewSkipLog(c.log, "workload controller", func(prefix string) { c.undecodable.WithLabelValues(prefix).Inc() })
	return c, nil
}

// reconcileOne folds the model into workload id and writes it if it
// changed, with its consumed eviction keys and its stale run reports
// deleted in the same transaction.
func (c *Controller) reconcileOne(ctx context.Context, snap *model, id string) error {
	wkv := snap.workloads[id]
	evictions := snap.evictionsOf(id) // in key order: by time, then sequence
	if wkv == nil {
		stale := snap.staleRuns(id)
		if len(evictions) == 0 && len(stale) == 0 {
			return nil
		}
		// The workload is gone: its evictions and run reports have nothing
		// to fold into.
		b := etcdstore.NewBatch(c.client)
		for _, e := range evictions {
			b.DeleteIf(e.key, e.modRev)
		}
		for _, r := range stale {
			b.DeleteIf(r.key, r.modRev)
		}
		b.Check(etcdstore.PrefixWorkloads+id, 0)
		_, err := b.Commit(ctx)
		return err
	}
	w := new(workloadv1.Workload)
	if err := proto.Unmarshal(wkv.value, w); err != nil {
		c.skipped.Report(wkv.key, wkv.modRev, fmt.Errorf("decode %s: %w", wkv.key, err))
		return nil
	}
	before := proto.Clone(w).(*workloadv1.Workload)
	now := c.clock.Now()
	if expired(w, now) {
		return c.autoDelete(ctx, wkv, id, now)
	}

	for _, e := range evictions {
		ev := new(workloadv1.WorkloadEvent)
		if err := proto.Unmarshal(e.value, ev); err != nil {
			c.skipped.Report(e.key, e.modRev, fmt.Errorf("decode %s: %w", e.key, err))
			continue // deleted below with the others: it can never be folded
		}
		if ev.GetTime() == nil {
			ev.Time = NewEvent(ev.GetType(), now, "").GetTime()
		}
		Fold(w, ev)
	}
	if !IsFinal(w.GetStatus().GetPhase()) {
		c.foldPods(w, snap, id, now)
	}
	if r := snap.reasons[id]; r != nil {
		st := new(workloadv1.WorkloadStatus)
		if err := proto.Unmarshal(r.value, st); err != nil {
			c.skipped.Report(r.key, r.modRev, fmt.Errorf("decode %s: %w", r.key, err))
		} else {
			FoldReasons(w, st.GetPendingReasons())
		}
	}
	EnforceLimits(w, now)

	stale := snap.staleRuns(id)
	changed := !proto.Equal(before, w)
	if !changed && len(evictions) == 0 && len(stale) == 0 {
		return nil
	}
	b := etcdstore.NewBatch(c.client)
	if changed {
		b.PutIf(wkv.key, forWrite(w), wkv.modRev)
	} else {
		b.Check(wkv.key, wkv.modRev)
	}
	for _, e := range evictions {
		b.DeleteIf(e.key, e.modRev)
	}
	for _, r := range stale {
		b.DeleteIf(r.key, r.modRev)
	}
	_, err := b.Commit(ctx)
	return err
}

// expired says whether a finished workload has outlived its time to live.
func expired(w *workloadv1.Workload, now time.Time) bool {
	ttl, end := w.GetSpec().GetTtlAfterFinishedSeconds(), w.GetStatus().GetEndTime()
	return ttl > 0 && IsFinal(w.GetStatus().GetPhase()) && end != nil &&
		!now.Before(end.AsTime().Add(time.Duration(ttl)*time.Second))
}

// autoDelete deletes a workload whose time to live has passed, with its
// audit record in the same transaction, so that the deletion is never
// unrecorded nor recorded without happening.
func (c *Controller) autoDelete(ctx context.Context, wkv *mvccKV, id string, now time.Time) error {
	project, wid, _ := strings.Cut(id, "/")
	key, ev := auth.SystemAuditEvent(now, "system:workload-controller", workloadv1.WorkloadService_DeleteWorkload_FullMethodName,
		WorkloadName(project, wid))
	_, err := etcdstore.NewBatch(c.client).DeleteIf(wkv.key, wkv.modRev).Put(key, ev).Commit(ctx)
	if err == nil {
		c.log.Info("workload controller: deleted a finished workload past its time to live", "workload", id)
	}
	return err
}

// foldPods compares the bound pods and their run reports with status.pods
// and folds what changed: SCHEDULED for new pods, STARTED for pods newly
// running, FINISHED when every pod has ended, Released when all are gone.
func (c *Controller) foldPods(w *workloadv1.Workload, snap *model, id string, now time.Time) {
	if w.Status == nil {
		w.Status = &workloadv1.WorkloadStatus{}
	}
	st := w.Status
	prev := map[int32]*workloadv1.PodStatus{}
	for _, p := range st.GetPods() {
		prev[p.GetIndex()] = p
	}
	var pods []*workloadv1.PodStatus
	for _, b := range snap.bindingsOf(id) {
		ps := new(workloadv1.PodStatus)
		if err := proto.Unmarshal(b.value, ps); err != nil {
			c.skipped.Report(b.key, b.modRev, fmt.Errorf("decode %s: %w", b.key, err))
			continue
		}
		ps.State = workloadv1.PodState_POD_STATE_BOUND
		if r := snap.runOf(id, b); r != nil {
			rep := new(nodemanagerv1.ReportWorkloadStateRequest)
			if err := proto.Unmarshal(r.value, rep); err != nil {
				c.skipped.Report(r.key, r.modRev, fmt.Errorf("decode %s: %w", r.key, err))
			} else {
				applyReport(ps, rep)
			}
		}
		pods = append(pods, ps)
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].GetIndex() < pods[j].GetIndex() })

	if len(pods) == 0 {
		if len(prev) > 0 || (st.GetRunningPods() > 0) {
			Released(w, now)
		}
		return
	}
	var fresh, stillNodes, freshNodes []string
	var still int32
	var gpus, cpu, memory int64
	var started, restarted, said []string
	for _, p := range pods {
		old, ok := prev[p.GetIndex()]
		if ok && old.GetNode() == p.GetNode() {
			still++
			stillNodes = append(stillNodes, p.GetNode())
		} else {
			fresh = append(fresh, strconv.Itoa(int(p.GetIndex())))
			freshNodes = append(freshNodes, p.GetNode())
			old = nil
		}
		if ran(p.GetState()) && (old == nil || !ran(old.GetState())) {
			started = append(started, strconv.Itoa(int(p.GetIndex())))
			if p.GetMessage() != "" { // what the agent did to start it (the commits it cloned)
				said = append(said, fmt.Sprintf("Pod %d: %s", p.GetIndex(), p.GetMessage()))
			}
		}
		for n := old.GetAgentRestarts(); n < p.GetAgentRestarts(); n++ {
			restarted = append(restarted, strconv.Itoa(int(p.GetIndex())))
		}
		gpus += int64(p.GetFractionMilli()) * int64(max(len(p.GetDeviceIndexes()), 1))
		ps := clusterproto.PodSpec(w.GetSpec(), int(p.GetIndex())) // a distributed training's master has its own
		cpu += ps.GetMilliCpu()
		memory += ps.GetMemoryBytes()
	}
	slices.Sort(stillNodes)
	st.Pods = pods
	st.RunningPods = still
	st.Nodes = slices.Compact(stillNodes)
	st.AllocatedMilliGpus, st.AllocatedMilliCpu, st.AllocatedMemoryBytes = gpus, cpu, memory
	// A workload is placed in one pool; a node deleted since keeps the
	// pool last seen.
	if pool, ok := snap.pools[pods[0].GetNode()]; ok {
		st.NodePool = pool
	}
	st.GpuIdleTime = workloadIdle(pods)
	if len(fresh) > 0 {
		slices.Sort(freshNodes)
		ev := NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SCHEDULED, now,
			fmt.Sprintf("Pods %s bound.", strings.Join(fresh, ", ")))
		ev.Pods = int32(len(fresh))
		ev.Nodes = slices.Compact(freshNodes)
		Fold(w, ev)
	}
	if len(started) > 0 {
		ev := NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_STARTED, now,
			strings.Join(append([]string{fmt.Sprintf("Pods %s running.", strings.Join(started, ", "))}, said...), " "))
		ev.Pods = int32(len(started))
		Fold(w, ev)
	}
	for _, i := range restarted {
		ev := NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_STARTED, now,
			fmt.Sprintf("Pod %s %s.", i, RestartedAfterAgentFailure))
		ev.Pods = 1
		Fold(w, ev)
	}
	if gangFailed(w, pods, now) {
		return
	}
	if int32(len(pods)) >= clusterproto.EffectivePods(w.GetSpec()) && allEnded(pods) {
		msg := "Every pod exited 0."
		for _, p := range pods {
			if p.GetState() == workloadv1.PodState_POD_STATE_FAILED {
				msg = fmt.Sprintf("Pod %d failed (exit code %d).", p.GetIndex(), p.GetExitCode())
				if p.GetMessage() != "" { // why, as the node agent saw it (out of GPU memory, …)
					msg = fmt.Sprintf("Pod %d failed (exit code %d): %s", p.GetIndex(), p.GetExitCode(), p.GetMessage())
				}
				break
			}
		}
		Fold(w, NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_FINISHED, now, msg))
	}
}

// RestartedAfterAgentFailure ends the STARTED event of a pod its node
// agent started again because it died while the agent was down ("Pod 0
// restarted after its node agent failed."): a second run of one binding,
// said so.
const RestartedAfterAgentFailure = "restarted after its node agent failed"

// applyReport sets a pod's state from its latest run report: SUCCEEDED
// only with exit code 0, FAILED for any other ending.
func applyReport(ps *workloadv1.PodStatus, rep *nodemanagerv1.ReportWorkloadStateRequest) {
	ps.ExitCode = rep.GetExitCode()
	ps.Message = rep.GetMessage()
	ps.GpuIdleTime = rep.GetGpuIdleTime()
	ps.AgentRestarts = rep.GetAgentRestarts()
	ps.Ports = rep.GetPorts()
	switch rep.GetState() {
	case workloadv1.PodState_POD_STATE_STARTING, workloadv1.PodState_POD_STATE_RUNNING, workloadv1.PodState_POD_STATE_STOPPED:
		ps.State = rep.GetState()
	case workloadv1.PodState_POD_STATE_SUCCEEDED:
		ps.State = workloadv1.PodState_POD_STATE_SUCCEEDED
		if rep.GetExitCode() != 0 {
			ps.State = workloadv1.PodState_POD_STATE_FAILED
		}
	case workloadv1.PodState_POD_STATE_FAILED:
		ps.State = workloadv1.PodState_POD_STATE_FAILED
	}
}

// workloadIdle is how long every GPU the workload holds has been idle: the
// least idle time of its running pods that hold GPUs (nil when none runs).
func workloadIdle(pods []*workloadv1.PodStatus) *durationpb.Duration {
	var least *durationpb.Duration
	for _, p := range pods {
		if p.GetState() != workloadv1.PodState_POD_STATE_RUNNING || p.GetFractionMilli() == 0 {
			continue
		}
		if least == nil || p.GetGpuIdleTime().AsDuration() < least.AsDuration() {
			least = durationpb.New(p.GetGpuIdleTime().AsDuration())
		}
	}
	return least
}

// ran: the pod has started (running, or already ended after running).
func ran(s workloadv1.PodState) bool {
	return s == workloadv1.PodState_POD_STATE_RUNNING || s == workloadv1.PodState_POD_STATE_SUCCEEDED || s == workloadv1.PodState_POD_STATE_FAILED
}

func allEnded(pods []*workloadv1.PodStatus) bool {
	for _, p := range pods {
		if s := p.GetState(); s != workloadv1.PodState_POD_STATE_SUCCEEDED && s != workloadv1.PodState_POD_STATE_FAILED {
			return false
		}
	}
	return true
}

// podWorkload is the workload ("project/workload") of a binding or run id
// "{node}/{project}.{workload}.{pod}", "" when malformed.
func podWorkload(id string) string {
	_, tail, ok := strings.Cut(id, "/")
	if !ok {
		return ""
	}
	parts := strings.Split(tail, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	if _, err := strconv.Atoi(parts[2]); err != nil {
		return ""
	}
	return clusterproto.ClusterID(parts[0], parts[1])
}

// evictionWorkload is the workload of an eviction id
// "{project}/{workload}/{unixnano}-{n}", "" when malformed.
func evictionWorkload(id string) string {
	parts := strings.Split(id, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	return clusterproto.ClusterID(parts[0], parts[1])
}

// reasonsWorkload is the workload of a pending reasons id
// "{project}/{workload}", "" when malformed.
func reasonsWorkload(id string) string {
	parts := strings.Split(id, "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	return clusterproto.ClusterID(parts[0], parts[1])
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// EnforceLimits stops (or requeues) a RUNNING workload that has reached its
// time limit or its idle-GPU limit at now: spec.suspended is set, so that
// the scheduler releases its pods; stop_reason says why (a stop) or
// requeue_on_release is set (a preemption: back to PENDING once released);
// and a LIMIT_REACHED event is folded. A workload already suspended, not
// running, or without limits is left alone.
func EnforceLimits(w *workloadv1.Workload, now time.Time) {
	l, st := w.GetLimits(), w.GetStatus()
	if l == nil || st.GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING || w.GetSpec().GetSuspended() {
		return
	}
	typ := clusterproto.TypeName(w.GetType())
	var msg string
	requeue := false
	if limit := l.GetTimeLimit(); limit != nil && RunningTime(w, now) >= limit.AsDuration() {
		msg = fmt.Sprintf("Stopped: it has run %s, the time limit of the %s scheduling rule of %s.",
			limit.AsDuration(), typ, l.GetSource())
	} else if limit := l.GetIdleGpuLimit(); limit != nil && st.GetGpuIdleTime() != nil && st.GetGpuIdleTime().AsDuration() >= limit.AsDuration() {
		prio, _ := clusterproto.EffectivePriority(w)
		requeue = l.GetPreemptWhenIdle() && prio.Preemptible
		verb := "Stopped"
		if requeue {
			verb = "Preempted back to pending"
		}
		msg = fmt.Sprintf("%s: its GPUs have been idle for %s, the idle-GPU limit of the %s scheduling rule of %s.",
			verb, st.GetGpuIdleTime().AsDuration(), typ, l.GetSource())
	}
	if msg == "" {
		return
	}
	w.Spec.Suspended = true
	if requeue {
		st.RequeueOnRelease = true
	} else {
		st.StopReason = msg
	}
	Fold(w, NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_LIMIT_REACHED, now, msg))
}
