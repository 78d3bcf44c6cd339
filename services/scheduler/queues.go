package scheduler

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/cluster"
)

// queueProto reports q per node pool, with the fair shares last computed.
// Called with mu held.
func (c *Cache) queueProto(q *cluster.Queue, now time.Time) *schedulerv1.Queue {
	st := c.state
	out := &schedulerv1.Queue{Name: queueName(q), UpdateTime: timestamppb.New(now)}
	if q.Kind == cluster.Project {
		out.Kind = schedulerv1.QueueKind_QUEUE_KIND_PROJECT
		if q.Parent != nil {
			out.ParentQueue = "departments/" + q.Parent.Name + "/queue"
		}
	} else {
		out.Kind = schedulerv1.QueueKind_QUEUE_KIND_DEPARTMENT
	}
	running, pending := map[int]int32{}, map[int]int32{}
	for _, p := range projectsOf(q) {
		for w := range p.Running() {
			if pool := w.Pool(); pool != nil {
				running[pool.Index]++
			}
		}
		for w := range p.Waiting() {
			if w.PlacedPods() == 0 {
				pending[st.Pool(w.Pools[0]).Index]++
			}
		}
	}
	for _, p := range st.Pools {
		qu, u := q.Quotas[p.Index], q.Usage[p.Index]
		out.NodePools = append(out.NodePools, &schedulerv1.QueueNodePool{
			NodePool:                "nodepools/" + p.Name,
			Deserved:                quantity(qu.Deserved),
			Limit:                   quantity(qu.Limit),
			FairShare:               quantity(q.FairShare[p.Index]),
			Allocated:               quantity(u.Allocated),
			AllocatedNonPreemptible: quantity(u.NonPreemptible),
			Requested:               quantity(u.Requested()),
			OverQuotaWeights:        weightsProto(qu.Weight),
			RunningWorkloads:        running[p.Index],
			PendingWorkloads:        pending[p.Index],
			TimeBasedFairShare:      timeBasedProto(q, p),
		})
	}
	return out
}

// parseQueueFilter parses ListQueuesRequest.filter: comparisons
// `kind = PROJECT|DEPARTMENT` and `parent_queue = "departments/x/queue"`
// joined by AND; empty keeps every queue.
func parseQueueFilter(expr string) (func(*cluster.Queue) bool, error) {
	var tests []func(*cluster.Queue) bool
	if strings.TrimSpace(expr) == "" {
		return func(*cluster.Queue) bool { return true }, nil
	}
	for _, part := range strings.Split(expr, " AND ") {
		field, value, ok := strings.Cut(part, "=")
		field, value = strings.TrimSpace(field), strings.Trim(strings.TrimSpace(value), `"`)
		if !ok || strings.HasSuffix(field, "!") || value == "" {
			return nil, apierr.InvalidFilter(expr, fmt.Sprintf("%q is not field = value", strings.TrimSpace(part)))
		}
		switch field {
		case "kind":
			var kind cluster.QueueKind
			switch strings.TrimPrefix(value, "QUEUE_KIND_") {
			case "PROJECT":
				kind = cluster.Project
			case "DEPARTMENT":
				kind = cluster.Department
			default:
				return nil, apierr.InvalidFilter(expr, fmt.Sprintf("kind %q is not PROJECT or DEPARTMENT", value))
			}
			tests = append(tests, func(q *cluster.Queue) bool { return q.Kind == kind })
		case "parent_queue":
			tests = append(tests, func(q *cluster.Queue) bool { return q.Parent != nil && queueName(q.Parent) == value })
		default:
			return nil, apierr.InvalidFilter(expr, fmt.Sprintf("field %q: supported are kind and parent_queue", field))
		}
	}
	return func(q *cluster.Queue) bool {
		for _, t := range tests {
			if !t(q) {
				return false
			}
		}
		return true
	}, nil
}
