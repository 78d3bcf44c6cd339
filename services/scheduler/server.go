package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// Config is what a deployment decides about the service.
type Config struct {
	// Replica names this replica in the election (GetLeader's replica);
	// the host name when empty.
	Replica string
	// SessionTTL is the election lease's TTL in seconds (default 3): how
	// long a leader that hangs, or whose host is gone, keeps its key (a
	// killed leader's lease is revoked by the replica that follows it,
	// failover.go).
	SessionTTL int
	// Interval between cycles while leading (default 1 s).
	Interval time.Duration
	// Debounce gathers changes before a cycle runs on them (default 50 ms).
	Debounce time.Duration
	// MaxOps bounds the writes of one plan transaction (default
	// etcdstore.DefaultMaxOps, etcd's --max-txn-ops).
	MaxOps int
	// Scheduling tunes every cycle (default scheduling.DefaultConfig()).
	Scheduling scheduling.Config
	// NodeLostGrace is how long a node whose agent's lease expired, or
	// that is NotReady (a Kubernetes node's Ready condition), keeps its
	// pods (cordoned) before they are lost (NODE_LOST): a node that comes
	// back within it finds them still bound. Default DefaultNodeLostGrace
	// (the Kubernetes runtime's callers give kube.DefaultNodeLostGrace);
	// negative is none.
	NodeLostGrace time.Duration
	// Clock is the time source (default time.Now).
	Clock func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// UsageInterval is how often the leader writes the queues' usage records
	// of time-based fair share (default 30 s): what a new leader starts from.
	UsageInterval time.Duration
	// ApplyWait bounds how long the leader waits, after a plan, for its
	// model to show the plan's writes (default 2 s); a model that has not
	// caught up by then is not planned on until it has.
	ApplyWait time.Duration
	// cycle is the scheduling core (scheduling.Cycle; tests replace it).
	cycle func(*cluster.State, scheduling.Config) scheduling.Plan
	// onWrite, when set, is called as the plan's writes take up each
	// workload (tests inject faults of the apply step through it).
	onWrite func(workload string)
	// PeerTransport is how a replica that does not lead connects to the
	// leader's advertised address to see its process end (failover.go);
	// plaintext when nil.
	PeerTransport credentials.TransportCredentials
	// WhileLeading, when set, runs beside the cycle loop for as long as
	// this replica leads, with a context that ends when leadership does: a
	// runtime that must act once for the whole cluster (the Kubernetes
	// runtime) runs there. Its error is logged; leadership goes on.
	WhileLeading func(ctx context.Context) error
}

// DefaultNodeLostGrace is Config.NodeLostGrace when 0.
const DefaultNodeLostGrace = 30 * time.Second

// Deps are the service's collaborators.
type Deps struct {
	Client *clientv3.Client
}

// Server is the SchedulerService and the scheduler replica behind it: the
// cache, the election and the cycle loop (Run).
type Server struct {
	schedulerv1.UnimplementedSchedulerServiceServer

	cfg     Config
	client  *clientv3.Client
	cache   *Cache
	log     *slog.Logger
	metrics *metrics

	mu         sync.Mutex
	address    string // where this replica serves gRPC (SetAddress), advertised in the election
	leader     *leadership
	lastCycle  time.Time
	cycles     int64
	lastPlan   map[string]decision // by workload cluster ID, from the last cycle
	lastEvents map[string]decision // the last placement or eviction of each workload neither deleted nor finished (forgetGone)

	// written is, by workload ID, the reasons (joined by "\n") of the
	// record last written under PrefixReasons; only the leader's loop
	// goroutine reads and sets it (reasons.go).
	written map[string]string
	// usage is the leader's time-based fair-share bookkeeping (usage.go);
	// only the leader's loop goroutine uses it.
	usage *usageBook
	// follower is the usage a replica that does not lead last read, at
	// followerRead, for its queries (followerUsage); guarded by mu.
	follower     *usageBook
	followerRead time.Time
	// behind is the last plan's committed writes while the model has not
	// shown them (loop goroutine only); held is, by workload ID, why a
	// workload is set aside after an invariant failure (loop goroutine).
	behind *behind
	held   map[string]string
	// asideEvents are the SET_ASIDE events of workloads set aside by a
	// dropped plan, written before the next cycle (loop goroutine only).
	asideEvents []asideEvent
}

// decision is what one cycle said about one workload.
type decision struct {
	at       time.Time
	outcome  schedulerv1.DecisionOutcome
	rule     workloadv1.SchedulingRule
	reasons  []string
	pending  []scheduling.Reason // a NOT_PLACED decision's reasons, structured
	pool     string              // `nodepools/{pool}` the decision concerns
	others   []string            // victims of a placement, or who took an eviction's room
	election int64
}

// New checks the configuration and returns a Server; Run starts it.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Client == nil {
		return nil, errors.New("scheduler: Deps.Client is nil")
	}
	if cfg.Replica == "" {
		cfg.Replica, _ = os.Hostname()
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 3
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = 50 * time.Millisecond
	}
	if sc := cfg.Scheduling; sc.Placement == 0 && sc.GangTimeout == 0 && sc.SearchBound == 0 && sc.Observe == nil {
		cfg.Scheduling = scheduling.DefaultConfig()
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.UsageInterval <= 0 {
		cfg.UsageInterval = 30 * time.Second
	}
	if cfg.NodeLostGrace == 0 {
		cfg.NodeLostGrace = DefaultNodeLostGrace
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ApplyWait <= 0 {
		cfg.ApplyWait = 2 * time.Second
	}
	if cfg.cycle == nil {
		cfg.cycle = scheduling.Cycle
	}
	m := newMetrics()
	c := newCache(deps.Client, cfg.Clock, cfg.Logger, m, max(cfg.NodeLostGrace, 0))
	c.onWrite = cfg.onWrite
	return &Server{cfg: cfg, client: deps.Client, log: cfg.Logger, metrics: m, cache: c,
		lastPlan: map[string]decision{}, lastEvents: map[string]decision{}, held: map[string]string{}}, nil
}

// Register adds the service to a gRPC server.
func (s *Server) Register(g *grpc.Server) { schedulerv1.RegisterSchedulerServiceServer(g, s) }

// RegisterGateway adds the REST routes to a gateway mux, forwarding to conn;
// its signature is grpcserver.GatewayFunc.
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return schedulerv1.RegisterSchedulerServiceHandler(ctx, mux, conn)
}

// SetAddress records the address this replica serves gRPC on, advertised
// to the others through the election (Leader.address). Call it before Run;
// a later call takes effect at the next campaign.
func (s *Server) SetAddress(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.address = addr
}

// Address is what SetAddress recorded.
func (s *Server) Address() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.address
}

// electionValue is what a candidate writes to its election key: its
// replica name, then its address after a newline (names and addresses
// have none).
func electionValue(replica, address string) string { return replica + "\n" + address }

func parseElectionValue(v string) (replica, address string) {
	replica, address, _ = strings.Cut(v, "\n")
	return replica, address
}

func (s *Server) setLeader(l *leadership) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = l
	if l != nil {
		s.metrics.leader.Set(1)
	} else {
		s.metrics.leader.Set(0)
	}
}

// recordCycle keeps what ExplainWorkload reports: the last cycle's reasons
// for every waiting workload, and each workload's last placement or eviction
// as written (res, err: what apply committed). A placement the plan made but
// did not write is reported NOT_PLACED with why; an eviction not written is
// not reported. pools names the node pool each decision concerns
// (Cache.poolsOf).
func (s *Server) recordCycle(plan scheduling.Plan, pools map[string]string, now time.Time, res applied, err error) {
	committed, bound := map[string]bool{}, map[string]bool{}
	for _, g := range res.done.groups {
		committed[g.workload] = true
		for _, op := range g.ops {
			if id, ok := strings.CutPrefix(op.key, etcdstore.PrefixBindings); ok && op.msg != nil {
				bound[id] = true
			}
		}
	}
	c := s.cache
	c.mu.Lock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgetGone(c.workloads)
	c.mu.Unlock()
	var election int64
	if s.leader != nil {
		election = s.leader.fence.Rev
	}
	s.lastCycle, s.cycles = now, s.cycles+1
	s.lastPlan = make(map[string]decision, len(plan.Waiting))
	for _, w := range plan.Waiting {
		s.lastPlan[w.Workload] = decision{at: now, outcome: schedulerv1.DecisionOutcome_DECISION_OUTCOME_NOT_PLACED,
			reasons: scheduling.Texts(w.Reasons), pending: w.Reasons, election: election, pool: pools[w.Workload]}
	}
	var written []scheduling.Binding
	for _, b := range plan.Bindings {
		switch {
		case bound[bindingID(b.Node, b.Workload, b.Pod)]:
			written = append(written, b)
		case !committed[b.Workload]:
			why := err
			if d, ok := res.dropped[b.Workload]; ok {
				why = d
			}
			s.lastPlan[b.Workload] = decision{at: now, outcome: schedulerv1.DecisionOutcome_DECISION_OUTCOME_NOT_PLACED,
				reasons:  []string{fmt.Sprintf("This cycle placed it, but its plan was not written: %v.", why)},
				election: election, pool: pools[b.Workload]}
		}
	}
	plan.Bindings = written
	plan.Evictions = slices.DeleteFunc(slices.Clone(plan.Evictions), func(e scheduling.Eviction) bool { return !committed[e.Workload] })
	for _, e := range plan.Evictions {
		d := decision{at: now, outcome: schedulerv1.DecisionOutcome_DECISION_OUTCOME_EVICTED, rule: ruleOf(e.Rule),
			reasons: []string{e.Reason}, election: election, pool: pools[e.Workload]}
		if e.For != "" {
			d.others = []string{workloadName(e.For)}
		}
		s.lastEvents[e.Workload] = d
	}
	victims := map[string][]string{}
	rules := map[string]workloadv1.SchedulingRule{}
	for _, e := range plan.Evictions {
		if e.For != "" {
			victims[e.For] = append(victims[e.For], workloadName(e.Workload))
			rules[e.For] = ruleOf(e.Rule)
		}
	}
	placed := map[string][]string{}
	var order []string
	for _, b := range plan.Bindings {
		if _, ok := placed[b.Workload]; !ok {
			order = append(order, b.Workload)
		}
		placed[b.Workload] = append(placed[b.Workload], "nodes/"+b.Node)
	}
	for _, id := range order {
		nodes := placed[id]
		pods := len(nodes)
		sort.Strings(nodes)
		nodes = slices.Compact(nodes)
		rule, ok := rules[id]
		if !ok {
			rule = workloadv1.SchedulingRule_SCHEDULING_RULE_ALLOCATE
		}
		v := victims[id]
		sort.Strings(v)
		s.lastEvents[id] = decision{at: now, outcome: schedulerv1.DecisionOutcome_DECISION_OUTCOME_PLACED,
			rule: rule, others: v, election: election, pool: pools[id],
			reasons: []string{"Placed " + plural(pods, "pod") + " on " + strings.Join(nodes, ", ") + "."}}
	}
}

// forgetGone drops the last events of workloads deleted or finished, so
// that lastEvents holds at most one entry per workload still stored and not
// final. Called with s.mu and the cache's lock held (stored is its
// workloads).
func (s *Server) forgetGone(stored map[string]*workloadv1.Workload) {
	for id := range s.lastEvents {
		w, ok := stored[id]
		if p := w.GetStatus().GetPhase(); !ok || p == workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED || p == workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED {
			delete(s.lastEvents, id)
		}
	}
}

// GetLeader reports the replica holding the election key.
func (s *Server) GetLeader(ctx context.Context, req *schedulerv1.GetLeaderRequest) (*schedulerv1.Leader, error) {
	if req.GetName() != "leader" {
		return nil, apierr.InvalidField("name", "must be leader")
	}
	resp, err := s.client.Get(ctx, etcdstore.PrefixElectionScheduler+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second)
	}
	if len(resp.Kvs) == 0 {
		return nil, apierr.Unavailable(commonv1.ErrorReason_NOT_LEADER, time.Second)
	}
	kv := resp.Kvs[0]
	replica, address := parseElectionValue(string(kv.Value))
	out := &schedulerv1.Leader{Name: "leader", Replica: replica, Address: address, ElectionRevision: kv.CreateRevision,
		Etag: etcdstore.FormatEtag(kv.ModRevision)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leader != nil && s.leader.fence.Key == string(kv.Key) {
		out.IsSelf = true
		out.AcquireTime = timestamppb.New(s.leader.acquire)
		out.CycleCount = s.cycles
		if !s.lastCycle.IsZero() {
			out.LastCycleTime = timestamppb.New(s.lastCycle)
		}
	}
	return out, nil
}

// GetQueue reports one project's or department's queue.
func (s *Server) GetQueue(ctx context.Context, req *schedulerv1.GetQueueRequest) (*schedulerv1.Queue, error) {
	kind, id, ok := parseQueueName(req.GetName())
	if !ok {
		return nil, apierr.InvalidField("name", "must be projects/{project}/queue or departments/{department}/queue")
	}
	s.followerUsage(ctx)
	c := s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return nil, errNotReady()
	}
	q := c.state.Queue(id)
	if q == nil || q.Kind != kind {
		if kind == cluster.Project {
			return nil, apierr.NotFound(apierr.Project, "projects/"+id)
		}
		return nil, apierr.NotFound(apierr.Department, "departments/"+id)
	}
	scheduling.ComputeFairShares(c.state)
	return c.queueProto(q, s.cfg.Clock()), nil
}

// ListQueues lists departments, then their projects, in creation order,
// those the filter keeps (queueFilter). A page token is the position of
// the last queue listed (queuePos): the next page starts after it, even
// when that queue or the next one was deleted meanwhile.
func (s *Server) ListQueues(ctx context.Context, req *schedulerv1.ListQueuesRequest) (*schedulerv1.ListQueuesResponse, error) {
	keep, err := parseQueueFilter(req.GetFilter())
	if err != nil {
		return nil, err
	}
	size := int(req.GetPageSize())
	switch {
	case size < 0:
		return nil, apierr.InvalidField("page_size", "must not be negative")
	case size == 0:
		size = 100
	case size > 1000:
		size = 1000
	}
	var start *queuePos
	if t := req.GetPageToken(); t != "" {
		p, ok := parseQueueToken(t)
		if !ok {
			return nil, apierr.InvalidPageToken()
		}
		start = &p
	}
	s.followerUsage(ctx)
	c := s.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready {
		return nil, errNotReady()
	}
	scheduling.ComputeFairShares(c.state)
	now := s.cfg.Clock()
	all := c.queuesInOrder()
	out := &schedulerv1.ListQueuesResponse{}
	var last queuePos
	for _, q := range all {
		if start != nil && q.pos.compare(*start) <= 0 {
			continue
		}
		if !keep(q.Queue) {
			continue
		}
		if len(out.Queues) == size {
			out.NextPageToken = last.token()
			break
		}
		out.Queues = append(out.Queues, c.queueProto(q.Queue, now))
		last = q.pos
	}
	return out, nil
}

// errNotReady answers queries before the cache has read the store once.
func errNotReady() error {
	return apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second)
}

func queueName(q *cluster.Queue) string {
	if q.Kind == cluster.Project {
		return "projects/" + q.Name + "/queue"
	}
	return "departments/" + q.Name + "/queue"
}

func parseQueueName(name string) (cluster.QueueKind, string, bool) {
	rest, ok := strings.CutSuffix(name, "/queue")
	if !ok {
		return 0, "", false
	}
	if id, ok := strings.CutPrefix(rest, "projects/"); ok && clusterproto.ValidID(id) {
		return cluster.Project, id, true
	}
	if id, ok := strings.CutPrefix(rest, "departments/"); ok && clusterproto.ValidID(id) {
		return cluster.Department, id, true
	}
	return 0, "", false
}

func weightsProto(w cluster.Weights) *schedulerv1.OverQuotaWeights {
	return &schedulerv1.OverQuotaWeights{Gpu: int32(w.Get(cluster.GPU)), Cpu: int32(w.Get(cluster.CPU)), Memory: int32(w.Get(cluster.Memory))}
}

func projectsOf(q *cluster.Queue) []*cluster.Queue {
	if q.Kind == cluster.Project {
		return []*cluster.Queue{q}
	}
	return q.Children
}

func quantity(r cluster.Resources) *commonv1.ResourceQuantity {
	return &commonv1.ResourceQuantity{MilliGpus: r.GPU, MilliCpu: r.CPU, MemoryBytes: r.Memory}
}

// ExplainWorkload reports what the last cycle said about a workload: its
// reasons when it waits, and its last placement or eviction.
func (s *Server) ExplainWorkload(ctx context.Context, req *schedulerv1.ExplainWorkloadRequest) (*schedulerv1.ExplainWorkloadResponse, error) {
	project, id, ok := clusterproto.ParseWorkloadName(req.GetName())
	if !ok {
		return nil, apierr.InvalidField("name", "must be projects/{project}/workloads/{workload}")
	}
	wid := clusterproto.ClusterID(project, id)
	out := &schedulerv1.ExplainWorkloadResponse{Name: req.GetName()}
	c := s.cache
	c.mu.Lock()
	if !c.ready {
		c.mu.Unlock()
		return nil, errNotReady()
	}
	raw, known := c.workloads[wid]
	if w := c.state.Workload(wid); w != nil {
		out.Phase = phaseOf(w)
	} else if known {
		out.Phase = raw.GetStatus().GetPhase()
	}
	c.mu.Unlock()
	if !known {
		return nil, apierr.NotFound(apierr.Workload, req.GetName())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.lastPlan[wid]; ok {
		for _, r := range d.pending {
			out.PendingReasons = append(out.PendingReasons, pendingReason(r))
		}
		out.LastDecision = d.proto()
	}
	if d, ok := s.lastEvents[wid]; ok && out.LastDecision == nil {
		out.LastDecision = d.proto()
	}
	if out.LastDecision == nil {
		out.LastDecision = &schedulerv1.Decision{Outcome: schedulerv1.DecisionOutcome_DECISION_OUTCOME_NOT_CONSIDERED}
	}
	return out, nil
}

func (d decision) proto() *schedulerv1.Decision {
	out := &schedulerv1.Decision{Time: timestamppb.New(d.at), ElectionRevision: d.election, Outcome: d.outcome,
		Rule: d.rule, NodePool: d.pool, Workloads: d.others, Message: strings.Join(d.reasons, "; ")}
	return out
}

func phaseOf(w *cluster.Workload) workloadv1.WorkloadPhase {
	switch w.Phase {
	case cluster.Running:
		return workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING
	case cluster.Completed:
		return workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED
	case cluster.Failed:
		return workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED
	}
	return workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
