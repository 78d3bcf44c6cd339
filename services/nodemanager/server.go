package nodemanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Clock tells the time; tests inject a fixed one.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Deps are the service's collaborators.
type Deps struct {
	// Client is the etcd client. Required.
	Client *clientv3.Client
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Clock stamps update_time; the system clock when nil.
	Clock Clock
	// NodeKeys hands the node agents of a Kubernetes cluster their nodes'
	// mark keys (GetNodeMarkKey; kube.NodeKeys); nil refuses every caller.
	NodeKeys NodeKeys
	// AgentTokens signs node agents' Runway tokens (IssueNodeAgentToken,
	// CreateNodeAgentToken); nil refuses both.
	AgentTokens AgentTokens
}

// NodeKeys is the key of node for the caller presenting the bearer token
// token, or an apierr error (PERMISSION_DENIED for another node's).
type NodeKeys interface {
	NodeKey(ctx context.Context, token, node string) ([]byte, error)
	// Review is the same check without the key: the caller is the agent
	// of the Kubernetes node node, whose Runway node id it returns.
	Review(ctx context.Context, token, node string) (string, error)
}

// AgentTokens signs the token of the agent of node (`nodes/{node}`), valid
// for ttl (cut to the longest token lifetime); pkg/auth's Guard does.
type AgentTokens interface {
	IssueNodeAgentToken(node string, ttl time.Duration) (string, time.Time, error)
}

// Server implements nodemanagerv1.NodeManagerServiceServer.
type Server struct {
	nodemanagerv1.UnimplementedNodeManagerServiceServer

	store    *store
	log      *slog.Logger
	clock    Clock
	nodeKeys NodeKeys
	tokens   AgentTokens
}

// New returns the service.
func New(deps Deps) (*Server, error) {
	if deps.Client == nil {
		return nil, errors.New("nodemanager: Deps.Client is nil")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Clock == nil {
		deps.Clock = systemClock{}
	}
	return &Server{store: newStore(deps.Client), log: deps.Logger.With("service", "nodemanager"), clock: deps.Clock,
		nodeKeys: deps.NodeKeys, tokens: deps.AgentTokens}, nil
}

// Register adds the service to a gRPC server (grpcserver.Server.Register).
func (s *Server) Register(g *grpc.Server) { nodemanagerv1.RegisterNodeManagerServiceServer(g, s) }

// RegisterGateway adds the REST routes (grpcserver.GatewayFunc).
func (s *Server) RegisterGateway(ctx context.Context, mux *runtime.ServeMux, conn *grpc.ClientConn) error {
	return nodemanagerv1.RegisterNodeManagerServiceHandler(ctx, mux, conn)
}

// GetNode reads a registered node; a node whose lease expired is
// NODE_NOT_FOUND.
func (s *Server) GetNode(ctx context.Context, req *nodemanagerv1.GetNodeRequest) (*nodemanagerv1.Node, error) {
	id, err := nodeOf("name", req.GetName())
	if err != nil {
		return nil, err
	}
	it, err := s.store.getNode(ctx, id)
	if err != nil {
		return nil, storeError(err, req.GetName())
	}
	n := it.Msg
	if err := s.store.fillAllocations(ctx, []*nodemanagerv1.Node{n}); err != nil {
		return nil, storeError(err, req.GetName())
	}
	if err := fillPlans(ctx, s.store.client, []*nodemanagerv1.Node{n}); err != nil {
		return nil, err
	}
	if err := fillHeartbeats(ctx, s.store.client, s.clock.Now(), []*nodemanagerv1.Node{n}, []int64{it.Lease}); err != nil {
		return nil, storeError(err, req.GetName())
	}
	return n, nil
}

// ListNodes pages through the registered nodes in name order. With a
// filter, store pages are read until the page is full, never past it, so
// the store's page token still marks the position.
func (s *Server) ListNodes(ctx context.Context, req *nodemanagerv1.ListNodesRequest) (*nodemanagerv1.ListNodesResponse, error) {
	if req.GetPageSize() < 0 {
		return nil, apierr.InvalidField("page_size", "must be 0 or more (0 means 100)")
	}
	f, err := parseFilter(req.GetFilter())
	if err != nil {
		return nil, err
	}
	size := etcdstore.PageSize(int(req.GetPageSize()))
	resp := &nodemanagerv1.ListNodesResponse{}
	token := req.GetPageToken()
	var leases []int64 // of resp.Nodes' keys
	for {
		page, err := s.store.nodes.List(ctx, "", size-len(resp.Nodes), token)
		if err != nil {
			return nil, storeError(err, "")
		}
		for _, it := range page.Items {
			it.Msg.Etag = it.Etag
			if f.matches(it.Msg) {
				resp.Nodes = append(resp.Nodes, it.Msg)
				leases = append(leases, it.Lease)
			}
		}
		token = page.NextPageToken
		if token == "" || len(resp.Nodes) == size {
			resp.NextPageToken = token
			if err := s.store.fillAllocations(ctx, resp.Nodes); err != nil {
				return nil, storeError(err, "")
			}
			if err := fillPlans(ctx, s.store.client, resp.Nodes); err != nil {
				return nil, err
			}
			if err := fillHeartbeats(ctx, s.store.client, s.clock.Now(), resp.Nodes, leases); err != nil {
				return nil, storeError(err, "")
			}
			return resp, nil
		}
	}
}

// DrainNode marks the node drained, in its drain key and its node key at
// once. Idempotent: draining a drained node updates the reason and
// eviction. With evict_workloads the node key says drain_evicts, and the
// scheduler (which owns bindings) sends its pods back to pending under
// NODE_DRAINED; without it they run to their end.
func (s *Server) DrainNode(ctx context.Context, req *nodemanagerv1.DrainNodeRequest) (*nodemanagerv1.Node, error) {
	drain := proto.Clone(req).(*nodemanagerv1.DrainNodeRequest)
	drain.Etag = ""
	return s.update(ctx, req.GetName(), req.GetEtag(), func(id string, n *nodemanagerv1.Node) (string, proto.Message) {
		n.Drained, n.DrainReason, n.DrainEvicts = true, req.GetReason(), req.GetEvictWorkloads()
		return drainKey(id), drain
	})
}

// UndrainNode clears the drain. Idempotent.
func (s *Server) UndrainNode(ctx context.Context, req *nodemanagerv1.UndrainNodeRequest) (*nodemanagerv1.Node, error) {
	return s.update(ctx, req.GetName(), req.GetEtag(), func(id string, n *nodemanagerv1.Node) (string, proto.Message) {
		n.Drained, n.DrainReason, n.DrainEvicts = false, "", false
		return drainKey(id), nil
	})
}

// update applies change to the stored node and writes it with the key
// change names (its value, or a delete when nil) in one fenced Txn,
// retrying when the node changed meanwhile (a heartbeat, a report).
func (s *Server) update(ctx context.Context, name, etag string, change func(id string, n *nodemanagerv1.Node) (string, proto.Message)) (*nodemanagerv1.Node, error) {
	id, err := nodeOf("name", name)
	if err != nil {
		return nil, err
	}
	for range maxRetries {
		it, err := s.store.getNode(ctx, id)
		if err != nil {
			return nil, storeError(err, name)
		}
		n, rev := it.Msg, it.Revision
		if etag != "" && etag != n.GetEtag() {
			return nil, apierr.EtagMismatch(name, n.GetEtag())
		}
		key, val := change(id, n)
		n.UpdateTime = timestamppb.New(s.clock.Now())
		newRev, err := s.store.setWith(ctx, id, rev, n, key, val)
		if errors.Is(err, errConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		n.Etag = etcdstore.FormatEtag(newRev)
		return n, nil
	}
	return nil, apierr.EtagMismatch(name, "")
}

// reportable are the pod states an agent may report.
var reportable = map[workloadv1.PodState]bool{
	workloadv1.PodState_POD_STATE_STARTING:  true,
	workloadv1.PodState_POD_STATE_RUNNING:   true,
	workloadv1.PodState_POD_STATE_SUCCEEDED: true,
	workloadv1.PodState_POD_STATE_FAILED:    true,
	workloadv1.PodState_POD_STATE_STOPPED:   true,
}

// ReportWorkloadState stores a pod's state under runs/, where the agent
// also writes it directly. A report older than the stored one is ignored
// (and succeeds). The pod must be bound to the node.
func (s *Server) ReportWorkloadState(ctx context.Context, req *nodemanagerv1.ReportWorkloadStateRequest) (*nodemanagerv1.ReportWorkloadStateResponse, error) {
	var bad []apierr.FieldViolation
	node, err := nodeOf("node", req.GetNode())
	if err != nil {
		bad = append(bad, apierr.FieldViolation{Field: "node", Description: "must be nodes/{node}"})
	}
	project, workload, ok := ParseWorkload(req.GetWorkload())
	if !ok {
		bad = append(bad, apierr.FieldViolation{Field: "workload", Description: "must be projects/{project}/workloads/{workload}"})
	}
	if req.GetPodIndex() < 0 {
		bad = append(bad, apierr.FieldViolation{Field: "pod_index", Description: "must be 0 or more"})
	}
	if !reportable[req.GetState()] {
		bad = append(bad, apierr.FieldViolation{Field: "state", Description: "must be STARTING, RUNNING, SUCCEEDED, FAILED or STOPPED"})
	}
	if len(req.GetMessage()) > 1024 {
		bad = append(bad, apierr.FieldViolation{Field: "message", Description: "must be at most 1024 characters"})
	}
	if req.GetObserveTime() == nil {
		bad = append(bad, apierr.FieldViolation{Field: "observe_time", Description: "is required"})
	}
	if len(bad) > 0 {
		return nil, apierr.Invalid(bad...)
	}
	if err := s.checkBound(ctx, node, project, workload, int(req.GetPodIndex()), req); err != nil {
		return nil, err
	}
	if _, err := s.store.putRun(ctx, RunKey(node, project, workload, int(req.GetPodIndex())), req); err != nil {
		if errors.Is(err, errConflict) {
			return nil, apierr.EtagMismatch(req.GetWorkload(), "")
		}
		return nil, err
	}
	return &nodemanagerv1.ReportWorkloadStateResponse{}, nil
}

func (s *Server) checkBound(ctx context.Context, node, project, workload string, pod int, req *nodemanagerv1.ReportWorkloadStateRequest) error {
	key := BindingKey(node, project, workload, pod)
	resp, err := s.store.client.Get(ctx, key, clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 1 {
		return nil
	}
	return apierr.FailedPrecondition(commonv1.ErrorReason_WORKLOAD_NOT_BOUND, req.GetWorkload(),
		fmt.Sprintf("Pod %d of %s is not bound to %s.", pod, req.GetWorkload(), req.GetNode())).
		With("node", req.GetNode()).With("podIndex", fmt.Sprint(pod))
}

// GetTimeSlicePlan returns the node's plan as its agent last stored it;
// before the agent stored any, the valid empty plan ("Empty when no device
// is shared") with revision 0. The node must exist.
func (s *Server) GetTimeSlicePlan(ctx context.Context, req *nodemanagerv1.GetTimeSlicePlanRequest) (*nodemanagerv1.TimeSlicePlan, error) {
	nodeName, ok := cutSuffix(req.GetName(), planSuffix)
	id, err := nodeOf("name", nodeName)
	if !ok || err != nil {
		return nil, apierr.InvalidField("name", "must be nodes/{node}/timeSlicePlan")
	}
	it, err := s.store.getNode(ctx, id)
	if err != nil {
		return nil, storeError(err, nodeName)
	}
	n := it.Msg
	plan, err := getPlan(ctx, s.store.client, id)
	if err != nil {
		return nil, err
	}
	if plan == nil {
		return &nodemanagerv1.TimeSlicePlan{Name: req.GetName(), UpdateTime: n.GetCreateTime(), Etag: "0"}, nil
	}
	return plan, nil
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) < len(suffix) || s[len(s)-len(suffix):] != suffix {
		return s, false
	}
	return s[:len(s)-len(suffix)], true
}

// storeError maps the store's errors; others pass through to
// grpcserver's apierr mapping.
func storeError(err error, name string) error {
	switch {
	case errors.Is(err, etcdstore.ErrNotFound):
		return apierr.NotFound(apierr.Node, name)
	case errors.Is(err, etcdstore.ErrInvalidPageToken), errors.Is(err, etcdstore.ErrPageTokenExpired):
		return apierr.InvalidPageToken().WithCause(err)
	}
	return err
}
