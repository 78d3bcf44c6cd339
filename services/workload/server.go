package workload

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/sealing"
)

// Clock tells the time; tests inject a fixed one. clockwork.Clock satisfies it.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// DefaultUpdateRetries is Config.UpdateRetries when it is 0.
const DefaultUpdateRetries = 5

// Config is what a deployment decides about the service.
type Config struct {
	// UpdateRetries bounds how often Suspend and Resume re-read and retry
	// when the workload changes between their read and their write (a status
	// update racing them) and the caller sent no etag. 0 means
	// DefaultUpdateRetries.
	UpdateRetries int
	// MaxWorkloadsPerProject caps the workloads one project holds (running,
	// pending or ended, until deleted); 0 means DefaultMaxWorkloadsPerProject.
	// The count is read before the create, so concurrent creates may pass it
	// by as many as run at once.
	MaxWorkloadsPerProject int
	// MaxWatchesPerCaller caps the WatchWorkloads streams one caller holds
	// open in this process (a user application's count as its creator's),
	// MaxWatchesPerProject those open on one project (the all-projects
	// watch, projects/-, counts only against its caller's), and MaxWatches
	// all of them; 0 means DefaultMaxWatchesPerCaller,
	// DefaultMaxWatchesPerProject and DefaultMaxWatches.
	MaxWatchesPerCaller, MaxWatchesPerProject, MaxWatches int
	// Examples: create the quick start's example environment ("quick-start")
	// and compute resources ("one-gpu", "two-gpus") at the account scope when
	// they are missing (`runway dev` sets it).
	Examples bool
	// Notifications bounds subscriptions and deliveries and says where
	// webhooks and SMTP servers may be.
	Notifications NotificationConfig
	// ProxyURL is where the tool proxy serves (http://127.0.0.1:7072): a
	// running workload's status gives each tool's URL under it, and a tool
	// ticket the URL that exchanges it. Empty: no URLs.
	ProxyURL string
}

// Deps are the service's collaborators.
type Deps struct {
	// Client is the etcd client the workloads are stored with. Required.
	Client *clientv3.Client
	// Projects says whether a project exists (QuotaProjects in production).
	// Required.
	Projects ProjectChecker
	// Logger gets the service's own log lines (watch streams); slog.Default()
	// when nil. Access logs and errors are pkg/grpcserver's.
	Logger *slog.Logger
	// Clock stamps create_time, update_time and events; the system clock
	// when nil.
	Clock Clock
	// AgentCredentials are sent to the node agents when relaying pod output
	// (a service token); nil sends none.
	AgentCredentials credentials.PerRPCCredentials
	// AgentTLS, when set, is how the agents are reached: over TLS only,
	// their certificates checked against its roots (and its ServerName when
	// set, else the host of each agent's address), its certificate presented
	// for mutual TLS. Nil reaches them in plaintext (`runway dev`, loopback).
	AgentTLS *tls.Config
	// CredentialKeys seal and open credentials' values (the key file of
	// --credentials-key-file); nil: credentials cannot be created or used.
	CredentialKeys *sealing.Ring
	// Guard decides what a notification's subscriber may be told (when
	// subscribing and before each delivery); nil: the NotificationService
	// is not served and nothing is sent.
	Guard *auth.Guard
	// ToolTokens issues the tool proxy's tickets and sessions (the
	// auth.Guard); nil: no tickets.
	ToolTokens ToolTokens
	// Endpoints authorises the callers of inference endpoints (the
	// auth.Guard); nil: none is served.
	Endpoints EndpointAuth
}

// Server implements workloadv1.WorkloadServiceServer.
type Server struct {
	workloadv1.UnimplementedWorkloadServiceServer

	cfg        Config
	store      *store
	projects   ProjectChecker
	gov        *Governance
	creds      *Credentials
	notify     *Notifications // nil without Deps.Guard
	tools      *Tools
	log        *slog.Logger
	clock      Clock
	agentCreds credentials.PerRPCCredentials
	agentConn  credentials.TransportCredentials
	watches    openWatches
}

// New returns the service; register it with Register and RegisterGateway.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Client == nil {
		return nil, errors.New("workload: Deps.Client is nil")
	}
	if deps.Projects == nil {
		return nil, errors.New("workload: Deps.Projects is nil")
	}
	if cfg.UpdateRetries <= 0 {
		cfg.UpdateRetries = DefaultUpdateRetries
	}
	if cfg.MaxWorkloadsPerProject <= 0 {
		cfg.MaxWorkloadsPerProject = DefaultMaxWorkloadsPerProject
	}
	for _, c := range []struct {
		v   *int
		def int
	}{{&cfg.MaxWatchesPerCaller, DefaultMaxWatchesPerCaller},
		{&cfg.MaxWatchesPerProject, DefaultMaxWatchesPerProject}, {&cfg.MaxWatches, DefaultMaxWatches}} {
		if *c.v <= 0 {
			*c.v = c.def
		}
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Clock == nil {
		deps.Clock = systemClock{}
	}
	s := &Server{cfg: cfg, store: newStore(deps.Client), projects: deps.Projects, gov: newGovernance(cfg, deps),
		log: deps.Logger.With("service", "workload"), clock: deps.Clock, agentCreds: deps.AgentCredentials,
		agentConn: insecure.NewCredentials()}
	s.creds = &Credentials{g: s.gov, store: s.store, ring: deps.CredentialKeys}
	if deps.Guard != nil {
		s.notify = newNotifications(cfg.Notifications, deps, s.creds)
	}
	s.tools = &Tools{s: s, tokens: deps.ToolTokens, endpoints: deps.Endpoints, client: deps.Client}
	if deps.AgentTLS != nil {
		s.agentConn = credentials.NewTLS(deps.AgentTLS)
	}
	if cfg.Examples {
		ctx, cancel := context.WithTimeout(context.Background(), examplesTimeout)
		defer cancel()
		if err := s.gov.createExamples(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// examplesTimeout bounds the examples' creation at startup.
const examplesTimeout = 10 * time.Second

// Register adds the WorkloadService and the GovernanceService to a gRPC
// server; its signature fits grpcserver.Server.Register.
func (s *Server) Register(g *grpc.Server) {
	workloadv1.RegisterWorkloadServiceServer(g, s)
	workloadv1.RegisterGovernanceServiceServer(g, s.gov)
	workloadv1.RegisterCredentialServiceServer(g, s.creds)
	workloadv1.RegisterDataSourceServiceServer(g, &DataSources{g: s.gov})
	if s.notify != nil {
		workloadv1.RegisterNotificationServiceServer(g, s.notify)
	}
	workloadv1.RegisterToolServiceServer(g, s.tools)
}

// RegisterGateway adds the REST routes of both services to a gateway mux,
// forwarding to conn; its signature is grpcserver.GatewayFunc.
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	if err := workloadv1.RegisterWorkloadServiceHandler(ctx, mux, conn); err != nil {
		return err
	}
	if err := workloadv1.RegisterGovernanceServiceHandler(ctx, mux, conn); err != nil {
		return err
	}
	if s.notify != nil {
		if err := workloadv1.RegisterNotificationServiceHandler(ctx, mux, conn); err != nil {
			return err
		}
	}
	if err := workloadv1.RegisterCredentialServiceHandler(ctx, mux, conn); err != nil {
		return err
	}
	if err := workloadv1.RegisterDataSourceServiceHandler(ctx, mux, conn); err != nil {
		return err
	}
	return workloadv1.RegisterToolServiceHandler(ctx, mux, conn)
}

// Dispatcher is what sends the notifications of the NotificationService
// (run it beside the server); nil without Deps.Guard.
func (s *Server) Dispatcher() *Dispatcher {
	if s.notify == nil {
		return nil
	}
	return newDispatcher(s.notify)
}

// Governance is the GovernanceService the server registers.
func (s *Server) Governance() *Governance { return s.gov }

// CreateWorkload reads the project (and its department) from the
// QuotaService, completes the spec from the named environment and compute
// resource and the effective policy's defaults, validates the result, checks
// the policy's rules and the project's scheduling rules, and writes the
// workload PENDING (STOPPED when submitted suspended) with a SUBMITTED event
// and the scheduling limits it is held to, in one create-if-absent
// transaction: a rejected request writes nothing.
func (s *Server) CreateWorkload(ctx context.Context, req *workloadv1.CreateWorkloadRequest) (*workloadv1.Workload, error) {
	project, ok := parseParent(req.GetParent(), false)
	if !ok || req.GetWorkload() == nil {
		return nil, validateCreate(req)
	}
	sub, err := s.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	w := s.newWorkload(project, req.GetWorkloadId(), sub.req.GetWorkload())
	w.Limits = sub.limits
	if c, ok := auth.CallerFrom(ctx); ok {
		// What "own workloads" in pkg/auth's role table compares.
		w.Creator, w.CreatorUid = c.Principal, c.UserUID
	}
	out, err := s.store.createUnderCap(ctx, project, req.GetWorkloadId(), w, s.cfg.MaxWorkloadsPerProject)
	if errors.Is(err, errProjectGone) {
		return nil, apierr.NotFound(apierr.Project, req.GetParent()).WithCause(err)
	}
	if err != nil {
		return nil, apiError(err, w.GetName())
	}
	return out, nil
}

// newWorkload builds the stored workload from the request's type, spec,
// labels and annotations, with the spec's defaults written out (pods, min_pods, priority), so that
// readers see the values the scheduler uses.
func (s *Server) newWorkload(project, id string, in *workloadv1.Workload) *workloadv1.Workload {
	now := s.clock.Now()
	spec := proto.Clone(in.GetSpec()).(*workloadv1.WorkloadSpec)
	spec.Pods = clusterproto.EffectivePods(spec)
	spec.MinPods = clusterproto.EffectiveMinPods(spec)
	w := &workloadv1.Workload{
		Name:        WorkloadName(project, id),
		Uid:         newUID(),
		Project:     projectsPrefix + project,
		Type:        in.GetType(),
		Spec:        spec,
		CreateTime:  timestamppb.New(now),
		Labels:      in.GetLabels(),
		Annotations: in.GetAnnotations(),
	}
	prio, _ := clusterproto.EffectivePriority(w) // validated
	spec.Priority = prio.Name
	preemptible := "not preemptible"
	if prio.Preemptible {
		preemptible = "preemptible"
	}
	Fold(w, NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUBMITTED, now,
		fmt.Sprintf("Submitted to project %s with priority %s (%d, %s), %d pod(s).",
			project, prio.Name, prio.Value, preemptible, spec.Pods)))
	return w
}

// GetWorkload reads one workload with its current status and etag.
func (s *Server) GetWorkload(ctx context.Context, req *workloadv1.GetWorkloadRequest) (*workloadv1.Workload, error) {
	project, id, err := nameOf(req.GetName())
	if err != nil {
		return nil, err
	}
	w, err := s.store.get(ctx, project, id)
	if err != nil {
		return nil, apiError(err, req.GetName())
	}
	return s.withToolURLs(w), nil
}

// ListWorkloads pages through one project's workloads, or every project's
// with `projects/-`, in name order. Every page of one listing is read at the
// revision of its first page (etcdstore.List), so pages join into one
// consistent snapshot. With a filter, store pages are read until the page is
// full, never past it, so that the store's token still marks the position.
func (s *Server) ListWorkloads(ctx context.Context, req *workloadv1.ListWorkloadsRequest) (*workloadv1.ListWorkloadsResponse, error) {
	project, ok := parseParent(req.GetParent(), true)
	if !ok {
		return nil, apierr.InvalidField("parent", "must be projects/{project} or projects/- for every project")
	}
	if req.GetPageSize() < 0 {
		return nil, apierr.InvalidField("page_size", "must be 0 or more (0 means 100)")
	}
	f, err := parseFilter(req.GetFilter())
	if err != nil {
		return nil, err
	}
	token, err := unwrapPageToken(req.GetPageToken(), req.GetFilter())
	if err != nil {
		return nil, err
	}
	if project != "-" && token == "" {
		if err := s.projects.ProjectExists(ctx, req.GetParent()); err != nil {
			return nil, err
		}
	}
	size := etcdstore.PageSize(int(req.GetPageSize()))
	resp := &workloadv1.ListWorkloadsResponse{}
	for {
		page, next, err := s.store.list(ctx, project, size-len(resp.Workloads), token)
		if err != nil {
			return nil, apiError(err, req.GetParent())
		}
		for _, w := range page {
			if f.matches(w) {
				resp.Workloads = append(resp.Workloads, s.withToolURLs(w))
			}
		}
		token = next
		if token == "" || len(resp.Workloads) == size {
			break
		}
	}
	resp.NextPageToken = wrapPageToken(token, req.GetFilter())
	return resp, nil
}

// DeleteWorkload removes a workload, if etag (when given) is still its etag.
// The scheduler and the node agents see the deletion on their watches and
// stop its pods.
func (s *Server) DeleteWorkload(ctx context.Context, req *workloadv1.DeleteWorkloadRequest) (*emptypb.Empty, error) {
	project, id, err := nameOf(req.GetName())
	if err != nil {
		return nil, err
	}
	if err := s.store.delete(ctx, project, id, req.GetEtag()); err != nil {
		return nil, apiError(err, req.GetName())
	}
	return &emptypb.Empty{}, nil
}

// SuspendWorkload sets spec.suspended and records SUSPENDED; a workload that
// holds nothing becomes STOPPED at once, a RUNNING one once the scheduler
// has released its pods (Released). Suspending a suspended workload returns
// it unchanged; a COMPLETED or FAILED one is INVALID_STATE_TRANSITION.
func (s *Server) SuspendWorkload(ctx context.Context, req *workloadv1.SuspendWorkloadRequest) (*workloadv1.Workload, error) {
	return s.change(ctx, req.GetName(), req.GetEtag(), "suspended", func(w *workloadv1.Workload, now time.Time) bool {
		if w.GetSpec().GetSuspended() && !w.GetStatus().GetRequeueOnRelease() {
			return false
		}
		// Suspended by the controller only to be preempted (idle-GPU
		// limit): the owner's suspension wins (Fold clears the requeue).
		w.Spec.Suspended = true
		Fold(w, NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SUSPENDED, now,
			"Suspended by its owner: its pods are stopped and its resources released until it is resumed."))
		return true
	})
}

// ResumeWorkload clears spec.suspended and records RESUMED; a STOPPED
// workload becomes PENDING and is scheduled like a new submission (its
// create_time still orders it). Resuming a workload that is not suspended
// returns it unchanged; a COMPLETED or FAILED one is INVALID_STATE_TRANSITION.
func (s *Server) ResumeWorkload(ctx context.Context, req *workloadv1.ResumeWorkloadRequest) (*workloadv1.Workload, error) {
	return s.change(ctx, req.GetName(), req.GetEtag(), "resumed", func(w *workloadv1.Workload, now time.Time) bool {
		if !w.GetSpec().GetSuspended() {
			return false
		}
		w.Spec.Suspended = false
		Fold(w, NewEvent(workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_RESUMED, now,
			"Resumed by its owner: it waits to be scheduled again."))
		return true
	})
}

// change is the read-modify-write of Suspend and Resume: read, check the
// caller's etag and that the workload has not ended, apply (false: nothing
// to do, return it as it is), and write conditioned on the etag read. A
// conflict is retried from the read when the caller sent no etag (someone
// else's write, typically a status update, came in between); with an etag
// it is the caller's ETAG_MISMATCH.
func (s *Server) change(ctx context.Context, name, etag, verbed string, apply func(*workloadv1.Workload, time.Time) bool) (*workloadv1.Workload, error) {
	project, id, err := nameOf(name)
	if err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		w, err := s.store.get(ctx, project, id)
		if err != nil {
			return nil, apiError(err, name)
		}
		if etag != "" && etag != w.GetEtag() {
			return nil, apierr.EtagMismatch(name, w.GetEtag())
		}
		if phase := w.GetStatus().GetPhase(); IsFinal(phase) {
			return nil, invalidTransition(name, phase, verbed)
		}
		if !apply(w, s.clock.Now()) {
			return w, nil
		}
		out, err := s.store.update(ctx, project, id, w, w.GetEtag())
		if errors.Is(err, etcdstore.ErrEtagMismatch) && etag == "" && attempt < s.cfg.UpdateRetries {
			continue
		}
		if err != nil {
			return nil, apiError(err, name)
		}
		return out, nil
	}
}

func invalidTransition(name string, phase workloadv1.WorkloadPhase, verbed string) error {
	p := PhaseName(phase)
	return apierr.FailedPrecondition(commonv1.ErrorReason_INVALID_STATE_TRANSITION, name,
		fmt.Sprintf("Workload %q has ended (%s) and cannot be %s; delete it and create it again to rerun it.", name, p, verbed)).
		With("phase", p)
}

// PhaseName is a phase without its enum prefix: "PENDING", "COMPLETED".
func PhaseName(p workloadv1.WorkloadPhase) string {
	return strings.TrimPrefix(p.String(), "WORKLOAD_PHASE_")
}

// nameOf parses a workload name field of a request.
func nameOf(name string) (project, id string, err error) {
	project, id, ok := ParseWorkloadName(name)
	if !ok {
		return "", "", apierr.InvalidField("name",
			"must be projects/{project}/workloads/{workload}, where each id "+strings.TrimPrefix(idRule, "must be "))
	}
	return project, id, nil
}

// The ListWorkloads page token is the store's token, followed, when there is
// a filter, by "~" and a checksum of the filter, so that a token is refused
// when the filter changes between pages (AIP-158). "~" is not in the
// store token's base64url alphabet.
func wrapPageToken(token, filter string) string {
	if token == "" || filter == "" {
		return token
	}
	return fmt.Sprintf("%s~%08x", token, crc32.ChecksumIEEE([]byte(filter)))
}

func unwrapPageToken(token, filter string) (string, error) {
	if token == "" {
		return "", nil
	}
	inner, sum, found := strings.Cut(token, "~")
	switch {
	case filter == "" && !found:
		return token, nil
	case filter != "" && found && sum == fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(filter))):
		return inner, nil
	}
	return "", apierr.InvalidPageToken()
}

// newUID is a random (version 4) UUID.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
