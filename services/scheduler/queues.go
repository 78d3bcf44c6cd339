package scheduler

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
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

// queuePos is where a queue stands in ListQueues' order: its department's
// creation (time, then name), then for a project its own. Every replica
// gives a queue the same position, and a position still orders the others
// once its queue is deleted, so a page token can be one.
type queuePos struct {
	deptAt  int64 // UnixNano
	dept    string
	projAt  int64
	project string // "" for the department itself
}

func (a queuePos) compare(b queuePos) int {
	if (a.project == "") != (b.project == "") && a.deptAt == b.deptAt && a.dept == b.dept {
		if a.project == "" {
			return -1 // a department before its projects
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.deptAt, b.deptAt), cmp.Compare(a.dept, b.dept),
		cmp.Compare(a.projAt, b.projAt), cmp.Compare(a.project, b.project))
}

// token is p as a page token: "{deptAt}/{dept}/{projAt}/{project}", the
// last two empty for a department, in unpadded URL-safe base64.
func (p queuePos) token() string {
	s := strconv.FormatInt(p.deptAt, 10) + "/" + p.dept + "/"
	if p.project != "" {
		s += strconv.FormatInt(p.projAt, 10)
	}
	s += "/" + p.project
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func parseQueueToken(t string) (queuePos, bool) {
	b, err := base64.RawURLEncoding.DecodeString(t)
	parts := strings.Split(string(b), "/")
	if err != nil || len(parts) != 4 || !clusterproto.ValidID(parts[1]) {
		return queuePos{}, false
	}
	var p queuePos
	p.dept = parts[1]
	if p.deptAt, err = strconv.ParseInt(parts[0], 10, 64); err != nil {
		return queuePos{}, false
	}
	if parts[2] == "" && parts[3] == "" {
		return p, true
	}
	if p.projAt, err = strconv.ParseInt(parts[2], 10, 64); err != nil || !clusterproto.ValidID(parts[3]) {
		return queuePos{}, false
	}
	p.project = parts[3]
	return p, true
}

type placedQueue struct {
	*cluster.Queue
	pos queuePos
}

// queuesInOrder is every department, each followed by its projects, in
// queuePos order. Called with mu held.
func (c *Cache) queuesInOrder() []placedQueue {
	at := func(ts *timestamppb.Timestamp) int64 { return ts.AsTime().UnixNano() }
	var out []placedQueue
	for _, q := range allQueues(c.state) {
		d := q
		if q.Kind == cluster.Project {
			d = q.Parent
		}
		p := queuePos{deptAt: at(c.departments[d.Name].GetCreateTime()), dept: d.Name}
		if q.Kind == cluster.Project {
			p.projAt, p.project = at(c.projects[q.Name].GetCreateTime()), q.Name
		}
		out = append(out, placedQueue{q, p})
	}
	slices.SortStableFunc(out, func(a, b placedQueue) int { return a.pos.compare(b.pos) })
	return out
}
