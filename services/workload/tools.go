package workload

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// MaxTools bounds the tools of one environment or workload.
const MaxTools = 16

// toolName is what a tool may be called: a Kubernetes port name too
// (IANA_SVC_NAME: at most 15, no "--", no "-" at either end).
var toolName = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// servingName is the name of an inference endpoint's port on Kubernetes,
// which no tool takes.
const servingName = "serving"

func validateTools(v *violations, at string, tools []*workloadv1.Tool) {
	if len(tools) > MaxTools {
		v.add(at+".tools", fmt.Sprintf("lists %d tools; at most %d", len(tools), MaxTools))
	}
	names, ports := map[string]bool{}, map[int32]bool{}
	for i, t := range tools {
		f := fmt.Sprintf("%s.tools[%d]", at, i)
		switch {
		case len(t.GetName()) > 15 || !toolName.MatchString(t.GetName()):
			v.add(f+".name", "must be 1-15 characters of [a-z0-9-] starting with a letter, with no \"--\" and no \"-\" at the end")
		case t.GetName() == servingName:
			v.add(f+".name", "must not be \"serving\": an inference endpoint's port is named so")
		case names[t.GetName()]:
			v.add(f+".name", "must be unique; an earlier tool has it")
		}
		names[t.GetName()] = true
		if _, ok := workloadv1.ToolType_name[int32(t.GetType())]; !ok || t.GetType() == workloadv1.ToolType_TOOL_TYPE_UNSPECIFIED {
			v.add(f+".type", "must be jupyter, vscode, tensorboard or custom")
		}
		if t.GetPort() < 1 || t.GetPort() > math.MaxUint16 {
			v.add(f+".port", "must be a port, 1-65535")
		} else if ports[t.GetPort()] {
			v.add(f+".port", "must be unique; an earlier tool listens on it")
		}
		ports[t.GetPort()] = true
		if p := t.GetPathPrefix(); p != "" && (!strings.HasPrefix(p, "/") || strings.ContainsFunc(p, isSpaceOrControl) ||
			strings.ContainsAny(p, "?#") || slices.Contains(strings.Split(p, "/"), "..")) {
			v.add(f+".path_prefix", "must be a path starting with /, without spaces, control characters, ?, # or ..")
		}
	}
}

// withToolURLs fills the status's tools: each of the spec's, with its URL
// on the proxy while the workload runs.
func (s *Server) withToolURLs(w *workloadv1.Workload) *workloadv1.Workload {
	s.withEndpointURL(w)
	tools := w.GetSpec().GetTools()
	if len(tools) == 0 || w.GetStatus() == nil {
		return w
	}
	running := w.GetStatus().GetPhase() == workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING
	w.Status.Tools = make([]*workloadv1.ToolStatus, len(tools))
	for i, t := range tools {
		ts := &workloadv1.ToolStatus{Name: t.GetName(), Type: t.GetType()}
		if running && s.cfg.ProxyURL != "" {
			ts.Url = strings.TrimSuffix(s.cfg.ProxyURL, "/") + clusterproto.ToolPath(w.GetName(), t.GetName())
		}
		w.Status.Tools[i] = ts
	}
	return w
}

// ToolTokens issues the proxy's tool tickets and sessions (auth.Guard).
type ToolTokens interface {
	IssueToolTicket(c auth.Caller, workload, tool string) (string, time.Time, error)
	IssueToolSession(c auth.Caller) (string, time.Time, error)
}

// Tools serves the ToolService: the proxy's tickets, sessions and targets.
type Tools struct {
	workloadv1.UnimplementedToolServiceServer
	s         *Server
	tokens    ToolTokens
	endpoints EndpointAuth
	client    *clientv3.Client
}

// tool is the workload's tool named in a ToolService request.
func (t *Tools) tool(ctx context.Context, name, tool string) (*workloadv1.Workload, *workloadv1.Tool, error) {
	project, id, err := nameOf(name)
	if err != nil {
		return nil, nil, err
	}
	w, err := t.s.store.get(ctx, project, id)
	if err != nil {
		return nil, nil, apiError(err, name)
	}
	for _, tl := range w.GetSpec().GetTools() {
		if tl.GetName() == tool {
			return w, tl, nil
		}
	}
	have := make([]string, 0, len(w.GetSpec().GetTools()))
	for _, tl := range w.GetSpec().GetTools() {
		have = append(have, tl.GetName())
	}
	return nil, nil, apierr.InvalidField("tool", fmt.Sprintf("%s has no tool %q (its tools: %s)", name, tool, strings.Join(have, ", ")))
}

// CreateToolTicket issues a one-time ticket to one tool, for the caller.
func (t *Tools) CreateToolTicket(ctx context.Context, req *workloadv1.CreateToolTicketRequest) (*workloadv1.ToolTicket, error) {
	if t.tokens == nil {
		return nil, apierr.FailedPrecondition(commonv1.ErrorReason_INVALID_STATE_TRANSITION, req.GetName(), "This deployment serves no tool proxy.")
	}
	if _, _, err := t.tool(ctx, req.GetName(), req.GetTool()); err != nil {
		return nil, err
	}
	c, _ := auth.CallerFrom(ctx)
	ticket, exp, err := t.tokens.IssueToolTicket(c, req.GetName(), req.GetTool())
	if err != nil {
		return nil, fmt.Errorf("issue a tool ticket: %w", err)
	}
	out := &workloadv1.ToolTicket{Ticket: ticket, ExpireTime: timestamppb.New(exp)}
	if u := t.s.cfg.ProxyURL; u != "" {
		out.Url = strings.TrimSuffix(u, "/") + clusterproto.ToolPath(req.GetName(), req.GetTool()) + "?ticket=" + url.QueryEscape(ticket)
	}
	return out, nil
}

// ExchangeToolTicket trades the call's ticket, once, for a tool session of
// its workload.
func (t *Tools) ExchangeToolTicket(ctx context.Context, req *workloadv1.ExchangeToolTicketRequest) (*workloadv1.ToolSession, error) {
	c, _ := auth.CallerFrom(ctx)
	b := c.Bound
	if t.tokens == nil || b.Type != auth.ToolTicketToken || b.ID == "" || b.Tool != req.GetTool() {
		return nil, apierr.PermissionDenied("workloads.view", req.GetName()+"/"+req.GetTool())
	}
	if _, _, err := t.tool(ctx, req.GetName(), req.GetTool()); err != nil {
		return nil, err
	}
	// Spent on every replica at once: the first exchange creates its key.
	lease, err := t.client.Grant(ctx, int64((auth.ToolTicketTTL+time.Minute)/time.Second))
	if err != nil {
		return nil, apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second).WithCause(err)
	}
	key := etcdstore.PrefixToolTickets + b.ID
	put, err := t.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, req.GetName(), clientv3.WithLease(lease.ID))).Commit()
	if err != nil {
		return nil, apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second).WithCause(err)
	}
	if !put.Succeeded {
		_, _ = t.client.Revoke(ctx, lease.ID)
		return nil, apierr.PermissionDenied("workloads.view", req.GetName()+"/"+req.GetTool()).
			WithCause(fmt.Errorf("tool ticket %s was already exchanged", b.ID))
	}
	session, exp, err := t.tokens.IssueToolSession(c)
	if err != nil {
		return nil, fmt.Errorf("issue a tool session: %w", err)
	}
	return &workloadv1.ToolSession{Session: session, ExpireTime: timestamppb.New(exp)}, nil
}

// ResolveTool says where a tool of a running workload is: the address a
// running pod's agent reported for the tool's port (the first pod's that
// has one).
func (t *Tools) ResolveTool(ctx context.Context, req *workloadv1.ResolveToolRequest) (*workloadv1.ToolTarget, error) {
	w, tl, err := t.tool(ctx, req.GetName(), req.GetTool())
	if err != nil {
		return nil, err
	}
	for _, p := range w.GetStatus().GetPods() {
		if p.GetState() != workloadv1.PodState_POD_STATE_RUNNING {
			continue
		}
		for _, pb := range p.GetPorts() {
			if pb.GetContainerPort() == tl.GetPort() && pb.GetAddress() != "" {
				out := &workloadv1.ToolTarget{Address: pb.GetAddress(), PathPrefix: tl.GetPathPrefix(), BaseUrl: tl.GetBaseUrl()}
				if tl.GetBaseUrl() {
					out.PathPrefix = clusterproto.ToolPath(w.GetName(), tl.GetName())
				}
				return out, nil
			}
		}
	}
	return nil, apierr.FailedPrecondition(commonv1.ErrorReason_INVALID_STATE_TRANSITION, req.GetName(),
		fmt.Sprintf("No pod of %s serves tool %s yet (phase %s); try again once it runs.", req.GetName(), tl.GetName(),
			strings.TrimPrefix(w.GetStatus().GetPhase().String(), "WORKLOAD_PHASE_")))
}
