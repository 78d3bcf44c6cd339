package workload

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// ReadWorkloadLogs streams a pod's output from the agent of the node it
// runs on. A pod that is not placed now (finished, preempted) is looked for
// on every node, newest registration first: the local runner keeps a pod's
// output in its directory after the pod ends, and a preempted pod that ran
// again elsewhere appends to a new file there.
func (s *Server) ReadWorkloadLogs(req *workloadv1.ReadWorkloadLogsRequest, stream workloadv1.WorkloadService_ReadWorkloadLogsServer) error {
	ctx := stream.Context()
	project, id, err := nameOf(req.GetName())
	if err != nil {
		return err
	}
	if req.GetPodIndex() < 0 {
		return apierr.InvalidField("pod_index", "must not be negative")
	}
	if req.GetTailLines() < 0 {
		return apierr.InvalidField("tail_lines", "must not be negative")
	}
	w, err := s.store.get(ctx, project, id)
	if err != nil {
		return apiError(err, req.GetName())
	}
	nodes, err := s.agents(ctx)
	if err != nil {
		return err
	}
	placed := ""
	for _, p := range w.GetStatus().GetPods() {
		if p.GetIndex() == req.GetPodIndex() {
			placed = p.GetNode()
		}
	}
	// The node the pod is on first; the others only if it has nothing.
	slices.SortStableFunc(nodes, func(a, b *nodemanagerv1.Node) int {
		switch {
		case a.GetName() == placed:
			return -1
		case b.GetName() == placed:
			return 1
		}
		return 0
	})
	for _, n := range nodes {
		found, err := s.relayLogs(ctx, n, &nodemanagerv1.ReadPodLogsRequest{Workload: req.GetName(), PodIndex: req.GetPodIndex(),
			Follow: req.GetFollow() && n.GetName() == placed, TailLines: req.GetTailLines()}, stream)
		if found || err != nil {
			return err
		}
	}
	return apierr.FailedPrecondition(commonv1.ErrorReason_WORKLOAD_NO_LOGS, req.GetName(),
		fmt.Sprintf("No node has output of pod %d of %s: it has not started, or its nodes are gone.", req.GetPodIndex(), req.GetName())).
		With("podIndex", fmt.Sprint(req.GetPodIndex()))
}

// agents are the registered nodes that serve NodeAgentService: a node's
// agent_address, else (a Kubernetes node, whose key the runtime writes)
// the address its agent keeps in agents/<node>.
func (s *Server) agents(ctx context.Context) ([]*nodemanagerv1.Node, error) {
	c := etcdstore.NewCollection(s.store.client, etcdstore.PrefixNodes, func() *nodemanagerv1.Node { return new(nodemanagerv1.Node) })
	items, _, err := c.ListAll(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	resp, err := s.store.client.Get(ctx, etcdstore.PrefixAgents, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read agent addresses: %w", err)
	}
	kube := map[string]string{}
	for _, kv := range resp.Kvs {
		kube[strings.TrimPrefix(string(kv.Key), etcdstore.PrefixAgents)] = string(kv.Value)
	}
	var out []*nodemanagerv1.Node
	for _, it := range items {
		n := it.Msg
		if addr := kube[it.ID]; n.GetAgentAddress() == "" && addr != "" {
			n.AgentAddress = addr
		}
		if n.GetAgentAddress() != "" {
			out = append(out, n)
		}
	}
	return out, nil
}

// relayLogs copies one agent's stream to the caller; found is false when
// that agent has no output of the pod.
func (s *Server) relayLogs(ctx context.Context, n *nodemanagerv1.Node, req *nodemanagerv1.ReadPodLogsRequest, out workloadv1.WorkloadService_ReadWorkloadLogsServer) (found bool, err error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(s.agentConn)}
	if s.agentCreds != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(s.agentCreds))
	}
	conn, err := grpc.NewClient("passthrough:///"+n.GetAgentAddress(), opts...)
	if err != nil {
		return false, fmt.Errorf("connect to the agent of %s: %w", n.GetName(), err)
	}
	defer conn.Close()
	in, err := nodemanagerv1.NewNodeAgentServiceClient(conn).ReadPodLogs(ctx, req)
	if err != nil {
		return false, fmt.Errorf("read logs from %s: %w", n.GetName(), err)
	}
	for {
		msg, err := in.Recv()
		switch {
		case err == io.EOF:
			return true, nil
		case apierr.Reason(err) == commonv1.ErrorReason_WORKLOAD_NO_LOGS.String() && !found:
			return false, nil
		case err != nil && ctx.Err() != nil:
			return true, nil // the caller went away
		case err != nil:
			s.log.Warn("reading pod logs from an agent failed", "node", n.GetName(), "err", err)
			if !found {
				return false, nil // an unreachable agent: try the other nodes
			}
			return true, fmt.Errorf("logs from %s interrupted: %w", n.GetName(), err)
		}
		found = true
		if err := out.Send(&workloadv1.ReadWorkloadLogsResponse{Data: msg.GetData()}); err != nil {
			return true, err
		}
	}
}
