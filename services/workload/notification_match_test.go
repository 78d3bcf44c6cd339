package workload

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

var (
	mt0     = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	failedE = workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_FAILED
)

func phaseWorkload(phase workloadv1.WorkloadPhase, events ...*workloadv1.WorkloadEvent) *workloadv1.Workload {
	return &workloadv1.Workload{Name: "projects/a/workloads/w", Uid: "u1", Project: "projects/a", CreateTime: timestamppb.New(mt0),
		UpdateTime: timestamppb.New(mt0.Add(time.Minute)),
		Status:     &workloadv1.WorkloadStatus{Phase: phase, Events: events, EndTime: timestamppb.New(mt0.Add(time.Minute))}}
}

func preempted(at time.Time) *workloadv1.WorkloadEvent {
	return &workloadv1.WorkloadEvent{Type: workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED, Time: timestamppb.New(at), Message: "reclaimed"}
}

func TestWorkloadChanges(t *testing.T) {
	running := phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING)
	for _, tc := range []struct {
		name      string
		prev, cur *workloadv1.Workload
		since     time.Time
		want      []workloadv1.NotificationEvent
	}{
		{"running to failed is a failure", running, phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED), mt0, []workloadv1.NotificationEvent{failedE}},
		{"failed and failed again is nothing new", phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED),
			phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED), mt0, nil},
		{"first seen failed within the lookback", nil, phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED), mt0, []workloadv1.NotificationEvent{failedE}},
		{"first seen failed before the lookback", nil, phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED), mt0.Add(time.Hour), nil},
		{"a new preemption event", running, phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING, preempted(mt0.Add(time.Second))), mt0,
			[]workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_PREEMPTED}},
		{"a preemption already seen", phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING, preempted(mt0.Add(time.Second))),
			phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING, preempted(mt0.Add(time.Second))), mt0, nil},
		{"completed", running, phaseWorkload(workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED), mt0,
			[]workloadv1.NotificationEvent{workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_COMPLETED}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []workloadv1.NotificationEvent
			for _, o := range workloadChanges(tc.prev, tc.cur, tc.since) {
				got = append(got, o.event)
				if o.project != "projects/a" || o.resource != "projects/a/workloads/w" || o.key == "" {
					t.Errorf("occurrence %+v", o)
				}
			}
			if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMatches(t *testing.T) {
	sub := func(mod func(*workloadv1.Subscription)) *workloadv1.Subscription {
		s := &workloadv1.Subscription{Events: []workloadv1.NotificationEvent{failedE}, CreateTime: timestamppb.New(mt0)}
		if mod != nil {
			mod(s)
		}
		return s
	}
	failure := occurrence{event: failedE, resource: "projects/a/workloads/w", project: "projects/a", time: mt0.Add(time.Minute)}
	dept := occurrence{event: workloadv1.NotificationEvent_NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA, resource: "departments/d", time: mt0.Add(time.Minute), overPercent: 30}
	pending := occurrence{event: workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_PENDING_TOO_LONG, project: "projects/a", time: mt0, pendingFor: 2 * time.Hour}
	for _, tc := range []struct {
		name string
		s    *workloadv1.Subscription
		o    occurrence
		want bool
	}{
		{"its event", sub(nil), failure, true},
		{"another event", sub(nil), occurrence{event: workloadv1.NotificationEvent_NOTIFICATION_EVENT_WORKLOAD_COMPLETED, project: "projects/a", time: failure.time}, false},
		{"before the subscription", sub(nil), occurrence{event: failedE, project: "projects/a", time: mt0.Add(-time.Second)}, false},
		{"its project", sub(func(s *workloadv1.Subscription) { s.Project = "projects/a" }), failure, true},
		{"another project", sub(func(s *workloadv1.Subscription) { s.Project = "projects/b" }), failure, false},
		{"department past the threshold", sub(func(s *workloadv1.Subscription) {
			s.Events, s.OverQuotaThresholdPercent = []workloadv1.NotificationEvent{dept.event}, 20
		}), dept, true},
		{"department under the threshold", sub(func(s *workloadv1.Subscription) {
			s.Events, s.OverQuotaThresholdPercent = []workloadv1.NotificationEvent{dept.event}, 50
		}), dept, false},
		{"pending past the threshold (begun before the subscription)", sub(func(s *workloadv1.Subscription) {
			s.Events, s.PendingThreshold = []workloadv1.NotificationEvent{pending.event}, durationpb.New(time.Hour)
		}), pending, true},
		{"pending under the threshold", sub(func(s *workloadv1.Subscription) {
			s.Events, s.PendingThreshold = []workloadv1.NotificationEvent{pending.event}, durationpb.New(3*time.Hour)
		}), pending, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := matches(tc.s, tc.o); got != tc.want {
				t.Errorf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestQuotaConditions(t *testing.T) {
	q := func(milli int64) []*quotav1.NodePoolQuota {
		return []*quotav1.NodePoolQuota{{NodePool: "nodepools/default", Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &milli}}}
	}
	projects := []*quotav1.Project{
		{Name: "projects/over", Uid: "p1", Department: "departments/d", NodePoolQuotas: q(1000)},
		{Name: "projects/at", Uid: "p2", Department: "departments/d", NodePoolQuotas: q(1000)},
		{Name: "projects/unlimited", Uid: "p3", NodePoolQuotas: q(-1)},
	}
	depts := []*quotav1.Department{{Name: "departments/d", Uid: "d1", NodePoolQuotas: q(2000)}, {Name: "departments/default", Uid: "d0", NodePoolQuotas: q(0)}}
	occ := quotaConditions(projects, depts, map[string]int64{"projects/over": 1500, "projects/at": 1000, "projects/unlimited": 9000}, mt0)
	got := map[string]int64{}
	for _, o := range occ {
		got[o.event.String()+" "+o.resource] = o.overPercent
	}
	want := map[string]int64{
		"NOTIFICATION_EVENT_PROJECT_OVER_QUOTA projects/over":          0,
		"NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA departments/d":       25,   // 2.5 of 2
		"NOTIFICATION_EVENT_DEPARTMENT_OVER_QUOTA departments/default": 1000, // 9 of 0
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: got %v (present %v), want %d", k, g, ok, v)
		}
	}
}
