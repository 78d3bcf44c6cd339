package workload

import (
	"context"
	"fmt"
	"time"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// SetWorkloadPriority changes spec.priority and records PRIORITY_CHANGED.
// The scheduler's cache resubmits a workload whose spec changed, so its next
// cycle orders, places and preempts it by the new class. The class must be
// one the workload's type may have at submit: a training stays preemptible,
// an inference stays inference. Setting the class it has returns it
// unchanged.
func (s *Server) SetWorkloadPriority(ctx context.Context, req *workloadv1.SetWorkloadPriorityRequest) (*workloadv1.Workload, error) {
	name := req.GetPriority()
	if name == "" {
		return nil, apierr.InvalidField("priority", "is required: one of "+orList(priorityNames(cluster.Priorities)))
	}
	p, err := cluster.PriorityByName(name)
	if err != nil {
		return nil, apierr.NotFound(apierr.Priority, name).InField("priority")
	}
	project, id, err := nameOf(req.GetName())
	if err != nil {
		return nil, err
	}
	cur, err := s.store.get(ctx, project, id)
	if err != nil {
		return nil, apiError(err, req.GetName())
	}
	// The type never changes, so the check holds for the version change
	// writes.
	if t := cur.GetType(); !priorityAllowed(t, p) {
		return nil, apierr.InvalidField("priority", fmt.Sprintf("must be %s for a %s",
			orList(allowedPriorityNames(t)), clusterproto.TypeName(t)))
	}
	return s.change(ctx, req.GetName(), req.GetEtag(), "given a priority", func(w *workloadv1.Workload, now time.Time) bool {
		old, err := clusterproto.EffectivePriority(w)
		if err == nil && old == p && w.GetSpec().GetPriority() != "" {
			return false
		}
		w.Spec.Priority = p.Name
		Fold(w, NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PRIORITY_CHANGED, now,
			fmt.Sprintf("Priority changed from %s to %s (%d).", old.Name, p.Name, p.Value)))
		return true
	})
}
