package workload

import (
	"fmt"
	"strings"
	"time"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
)

// occurrence is one thing that happened, before it is matched against the
// subscriptions.
type occurrence struct {
	event    workloadv1.NotificationEvent
	resource string // the workload, node, project or department
	project  string // projects/{p} for workload and project events
	message  string
	time     time.Time
	// key identifies it among every occurrence, the same when found again
	// (after a restart), so its delivery is recorded once.
	key string
	// dept: for DEPARTMENT_OVER_QUOTA, the over-use in percent of quota,
	// matched against each subscription's threshold.
	overPercent int64
	// pendingFor and idleFor: how long, for the thresholds.
	pendingFor, idleFor time.Duration
}

// isWorkload reports whether o is about a workload (viewed with the
// workload's own permission).
func (o occurrence) isWorkload() bool { return strings.Contains(o.resource, workloadsInfix) }

// workloadChanges are the edge events between prev (nil: first seen) and
// cur: a phase that became FAILED or COMPLETED, each new PREEMPTED event.
// On the first sight only those since `since` count.
func workloadChanges(prev, cur *workloadv1.Workload, since time.Time) []occurrence {
	var out []occurrence
	st := cur.GetStatus()
	base := occurrence{resource: cur.GetName(), project: cur.GetProject()}
	phase := st.GetPhase()
	if phase != prev.GetStatus().GetPhase() || prev == nil {
		when := st.GetEndTime().AsTime()
		if st.GetEndTime() == nil {
			when = cur.GetUpdateTime().AsTime()
		}
		o := base
		o.time = when
		switch phase {
		case workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED:
			o.event, o.key = workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_FAILED, cur.GetUid()+"/failed"
			o.message = fmt.Sprintf("Workload %s failed%s.", cur.GetName(), reasonSuffix(st))
		case workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED:
			o.event, o.key = workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_COMPLETED, cur.GetUid()+"/completed"
			o.message = fmt.Sprintf("Workload %s completed.", cur.GetName())
		}
		if o.event != 0 && (prev != nil || !when.Before(since)) {
			out = append(out, o)
		}
	}
	seen := map[string]bool{}
	for _, e := range prev.GetStatus().GetEvents() {
		seen[eventID(e)] = true
	}
	for _, e := range st.GetEvents() {
		if e.GetType() != workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED || seen[eventID(e)] ||
			prev == nil && e.GetTime().AsTime().Before(since) {
			continue
		}
		o := base
		o.event, o.time = workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_PREEMPTED, e.GetTime().AsTime()
		o.key = cur.GetUid() + "/preempted/" + eventID(e)
		o.message = fmt.Sprintf("Workload %s was preempted: %s", cur.GetName(), e.GetMessage())
		out = append(out, o)
	}
	return out
}

func eventID(e *workloadv1.WorkloadEvent) string {
	return fmt.Sprintf("%d.%d", e.GetType(), e.GetTime().AsTime().UnixNano())
}

// reasonSuffix is why a workload failed, from its first failed pod.
func reasonSuffix(st *workloadv1.WorkloadStatus) string {
	for _, p := range st.GetPods() {
		if p.GetState() == workloadv1.PodState_POD_STATE_FAILED {
			if m := p.GetMessage(); m != "" {
				return fmt.Sprintf(": pod %d exited %d (%s)", p.GetIndex(), p.GetExitCode(), m)
			}
			return fmt.Sprintf(": pod %d exited %d", p.GetIndex(), p.GetExitCode())
		}
	}
	if r := st.GetStopReason(); r != "" {
		return ": " + r
	}
	return ""
}

// workloadConditions are the lasting conditions of one workload now:
// pending since, GPUs idle for.
func workloadConditions(w *workloadv1.Workload, now time.Time) []occurrence {
	st := w.GetStatus()
	base := occurrence{resource: w.GetName(), project: w.GetProject(), time: now}
	switch st.GetPhase() {
	case workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING:
		since := w.GetCreateTime().AsTime()
		for _, e := range st.GetEvents() {
			switch e.GetType() {
			case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED, workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_RESUMED:
				since = e.GetTime().AsTime()
			}
		}
		o := base
		o.event, o.pendingFor = workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_PENDING_TOO_LONG, now.Sub(since)
		o.key = fmt.Sprintf("%s/pending/%d", w.GetUid(), since.UnixNano())
		o.message = fmt.Sprintf("Workload %s has been pending for %s.", w.GetName(), o.pendingFor.Round(time.Second))
		return []occurrence{o}
	case workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING:
		idle := st.GetGpuIdleTime().AsDuration()
		if idle <= 0 {
			return nil
		}
		o := base
		o.event, o.idleFor = workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_IDLE_GPUS, idle
		o.key = fmt.Sprintf("%s/idle/%d", w.GetUid(), st.GetStartTime().AsTime().UnixNano())
		o.message = fmt.Sprintf("The GPUs of workload %s have been idle for %s.", w.GetName(), idle.Round(time.Second))
		return []occurrence{o}
	}
	return nil
}

// nodeChanges: a node deleted (its lease expired) is lost; a device that
// was healthy and is not is unhealthy.
func nodeChanges(prev, cur *nodemanagerv1.Node, deleted bool, now time.Time) []occurrence {
	if deleted {
		return []occurrence{{event: workloadv1.NotificationEvent_NOTIFICATION_EVENT_NODE_LOST, resource: prev.GetName(), time: now,
			key: prev.GetUid() + "/lost", message: fmt.Sprintf("Node %s is lost: its agent stopped renewing its lease.", prev.GetName())}}
	}
	healthy := map[string]bool{}
	for _, d := range prev.GetDevices() {
		healthy[d.GetUuid()] = d.GetHealthy()
	}
	var out []occurrence
	for _, d := range cur.GetDevices() {
		if was, ok := healthy[d.GetUuid()]; d.GetHealthy() || ok && !was || prev == nil {
			continue
		}
		out = append(out, occurrence{event: workloadv1.NotificationEvent_NOTIFICATION_EVENT_GPU_UNHEALTHY, resource: cur.GetName(), time: now,
			key:     fmt.Sprintf("%s/gpu/%s/%d", cur.GetUid(), d.GetUuid(), cur.GetUpdateTime().AsTime().UnixNano()),
			message: fmt.Sprintf("GPU %d (%s) of node %s is unhealthy: %s", d.GetIndex(), d.GetModel(), cur.GetName(), d.GetHealthMessage())})
	}
	return out
}

// deservedGPUs is a quota's deserved milli-GPUs over its node pools; -1
// when any pool's is unlimited.
func deservedGPUs(qs []*quotav1.NodePoolQuota) int64 {
	var sum int64
	for _, q := range qs {
		d := q.GetGpu().GetDeservedMilliGpus()
		if d < 0 {
			return -1
		}
		sum += d
	}
	return sum
}

// quotaConditions: each project whose allocated GPUs pass its deserved
// quota, and each department over its own, with by how much. allocated is
// by project name.
func quotaConditions(projects []*quotav1.Project, depts []*quotav1.Department, allocated map[string]int64, now time.Time) []occurrence {
	var out []occurrence
	byDept := map[string]int64{}
	for _, p := range projects {
		id := p.GetName()
		d := p.GetDepartment()
		if d == "" {
			d = departmentsPrefix + "default"
		}
		byDept[d] += allocated[id]
		if q := deservedGPUs(p.GetNodePoolQuotas()); q >= 0 && allocated[id] > q {
			out = append(out, occurrence{event: workloadv1.NotificationEvent_NOTIFICATION_EVENT_PROJECT_OVER_QUOTA,
				resource: p.GetName(), project: p.GetName(), time: now, key: p.GetUid() + "/over-quota",
				message: fmt.Sprintf("Project %s uses %s GPUs, over its quota of %s.", p.GetName(), milli(allocated[id]), milli(q))})
		}
	}
	for _, d := range depts {
		q := deservedGPUs(d.GetNodePoolQuotas())
		used := byDept[d.GetName()]
		if q < 0 || used <= q {
			continue
		}
		pct := int64(1000)
		if q > 0 {
			pct = (used - q) * 100 / q
		}
		out = append(out, occurrence{event: workloadv1.NotificationEvent_NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA,
			resource: d.GetName(), time: now, key: d.GetUid() + "/over-quota", overPercent: pct,
			message: fmt.Sprintf("Department %s uses %s GPUs, %d%% over its quota of %s.", d.GetName(), milli(used), pct, milli(q))})
	}
	return out
}

func milli(v int64) string {
	if v%1000 == 0 {
		return fmt.Sprint(v / 1000)
	}
	return fmt.Sprintf("%.3g", float64(v)/1000)
}

// matches reports whether s asks for o (its event, project, thresholds,
// and nothing from before it existed).
func matches(s *workloadv1.Subscription, o occurrence) bool {
	named := false
	for _, e := range s.GetEvents() {
		named = named || e == o.event
	}
	switch {
	case !named, o.time.Before(s.GetCreateTime().AsTime()) && o.pendingFor == 0 && o.idleFor == 0,
		s.GetProject() != "" && o.project != s.GetProject() && o.project != "":
		return false
	case o.event == workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_PENDING_TOO_LONG:
		return o.pendingFor >= s.GetPendingThreshold().AsDuration()
	case o.event == workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_IDLE_GPUS:
		return o.idleFor >= s.GetIdleThreshold().AsDuration()
	case o.event == workloadv1.NotificationEvent_NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA:
		return s.GetOverQuotaThresholdPercent() == 0 || o.overPercent > int64(s.GetOverQuotaThresholdPercent())
	}
	return true
}

// mayView reports whether who may be told of o now: a workload's by the
// workload view permission on it (attrs: its creator, when it still
// exists), the cluster's by the event's permission.
func (n *Notifications) mayView(who auth.Caller, s *workloadv1.Subscription, o occurrence, attrs auth.Attrs) bool {
	if o.isWorkload() {
		return n.allowed(who, viewWorkloads, n.guard.ProjectTarget(o.project, o.resource), attrs)
	}
	p, t, ok := n.eventPermission(o.event, o.project)
	if !ok {
		return false
	}
	if o.event == workloadv1.NotificationEvent_NOTIFICATION_EVENT_PROJECT_OVER_QUOTA {
		t = n.guard.ProjectTarget(o.project, o.project)
		if s.GetProject() == "" && !n.allowed(who, p, auth.Target{Level: auth.AccountLevel, Resource: "projects"}, auth.Attrs{}) {
			return false
		}
	}
	return n.allowed(who, p, t, auth.Attrs{})
}
