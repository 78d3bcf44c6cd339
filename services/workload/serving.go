package workload

import (
	"context"
	"fmt"
	"math"
	"strings"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

func validateServing(v *violations, at string, typ workloadv1.WorkloadType, s *workloadv1.Serving) {
	if s == nil {
		return
	}
	if typ != workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE {
		v.add(at+".serving", "is for inference workloads only")
	}
	if s.GetPort() < 1 || s.GetPort() > math.MaxUint16 {
		v.add(at+".serving.port", "must be a port, 1-65535")
	}
	if _, ok := workloadv1.ServingAccess_name[int32(s.GetAccess())]; !ok || s.GetAccess() == workloadv1.ServingAccess_SERVING_ACCESS_UNSPECIFIED {
		v.add(at+".serving.access", "must be authenticated, project or public")
	}
}

// EndpointAuth authenticates and authorises the callers of inference
// endpoints, whose access is the workload's own (auth.Guard).
type EndpointAuth interface {
	// Authenticate is the caller of an API token; UNAUTHENTICATED without
	// a valid one.
	Authenticate(ctx context.Context) (auth.Caller, error)
	// MayViewWorkload reports whether c may view w.
	MayViewWorkload(c auth.Caller, w *workloadv1.Workload) (bool, error)
}

// ResolveEndpoint says where a running inference workload serves, to a
// caller its access lets in.
func (t *Tools) ResolveEndpoint(ctx context.Context, req *workloadv1.ResolveEndpointRequest) (*workloadv1.ToolTarget, error) {
	project, id, err := nameOf(req.GetName())
	if err != nil {
		return nil, err
	}
	if t.endpoints == nil {
		return nil, apierr.FailedPrecondition(commonv1.ErrorReason_INVALID_STATE_TRANSITION, req.GetName(), "This deployment serves no inference endpoints.")
	}
	w, err := t.s.store.get(ctx, project, id)
	sv := w.GetSpec().GetServing()
	if err != nil || sv == nil {
		// No endpoint: said only to a signed-in caller, so that no one
		// without a token learns which workloads exist.
		if _, err := t.endpoints.Authenticate(ctx); err != nil {
			return nil, err
		}
		return nil, apierr.NotFound(apierr.Workload, req.GetName())
	}
	if sv.GetAccess() != workloadv1.ServingAccess_SERVING_ACCESS_PUBLIC {
		c, err := t.endpoints.Authenticate(ctx)
		if err != nil {
			return nil, err
		}
		if sv.GetAccess() != workloadv1.ServingAccess_SERVING_ACCESS_AUTHENTICATED {
			ok, err := t.endpoints.MayViewWorkload(c, w)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, apierr.PermissionDenied("workloads.view", req.GetName())
			}
		}
	}
	for _, p := range w.GetStatus().GetPods() {
		if p.GetState() != workloadv1.PodState_POD_STATE_RUNNING {
			continue
		}
		for _, pb := range p.GetPorts() {
			if pb.GetContainerPort() == sv.GetPort() && pb.GetAddress() != "" {
				return &workloadv1.ToolTarget{Address: pb.GetAddress()}, nil
			}
		}
	}
	return nil, apierr.FailedPrecondition(commonv1.ErrorReason_INVALID_STATE_TRANSITION, req.GetName(),
		fmt.Sprintf("No replica of %s serves yet (phase %s); try again once it runs.", req.GetName(),
			strings.TrimPrefix(w.GetStatus().GetPhase().String(), "WORKLOAD_PHASE_")))
}

// withEndpointURL fills a running inference workload's endpoint URL.
func (s *Server) withEndpointURL(w *workloadv1.Workload) {
	if w.GetSpec().GetServing() == nil || w.GetStatus() == nil || s.cfg.ProxyURL == "" ||
		w.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING {
		return
	}
	w.Status.EndpointUrl = strings.TrimSuffix(s.cfg.ProxyURL, "/") + clusterproto.EndpointPath(w.GetName())
}
