package auth

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

// UnaryInterceptor is the grpcserver.Config.Auth slot: authenticate,
// authorise from the method's declaration (deny by default), filter List
// results, audit mutating calls.
func (g *Guard) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	m, ok := methods[info.FullMethod]
	if !ok {
		return nil, apierr.PermissionDenied("undeclared", info.FullMethod)
	}
	if !probe(info.FullMethod) {
		if err := g.refuseFlood(ctx, info.FullMethod); err != nil {
			return nil, err
		}
	}
	if m.Access == Public {
		resp, err := handler(ctx, req)
		if info.FullMethod == identitySvc+"Login" {
			g.auditLogin(ctx, req, resp, err)
		} else if c := apierr.Code(err); c == codes.Unauthenticated || c == codes.PermissionDenied {
			// A public method that checks its own credentials (a node
			// agent's token review) refuses at a cost: its refusals spend
			// the host's budget like any other, so a flood of them is
			// refused before that work.
			g.audit.refused.spend(hostOf(grpcserver.PeerAddress(ctx)))
		}
		return resp, err
	}
	c, t, err := g.admit(ctx, m, req)
	if err != nil {
		if m.Mutating() {
			g.auditCall(ctx, c, info.FullMethod, t.Resource, err)
		} else if c.Principal == "" {
			g.audit.refused.spend(hostOf(grpcserver.PeerAddress(ctx)))
		}
		return nil, err
	}
	ctx = WithCaller(ctx, c)
	if m.Mutating() {
		ctx = withActingScope(ctx, g.actingScope(c, m.Perm, t))
	}
	binding, err := g.pageIn(c, info.FullMethod, req)
	if err != nil {
		return nil, err
	}
	var ev *identityv1.AuditEvent
	if m.Mutating() {
		// The event is in etcd before the change is made: an acknowledged
		// change always has one, whatever happens to the process after.
		ev = g.auditEvent(ctx, c, info.FullMethod, t.Resource)
		ev.StatusCode, ev.OutcomeUnknown = int32(codes.Unknown), true
		if err := g.audit.commit(ctx, proto.Clone(ev).(*identityv1.AuditEvent)); err != nil {
			g.log.Warn("audit: a change refused: its event could not be written", "method", info.FullMethod, "err", err)
			return nil, apierr.Unavailable(commonv1.ErrorReason_STORE_UNAVAILABLE, time.Second)
		}
	}
	resp, err := handler(ctx, req)
	if err == nil && m.Filter != nil {
		m.Filter(g, resp, g.viewFilter(c, m.Perm))
	}
	if err == nil && m.Redact {
		g.redact(c, resp)
	}
	if err == nil {
		err = g.pageOut(resp, binding)
	}
	if ev != nil {
		ev.StatusCode, ev.ErrorReason, ev.OutcomeUnknown = int32(apierr.Code(err)), apierr.Reason(err), false
		g.audit.record(ev)
	}
	return resp, err
}

// StreamInterceptor is the grpcserver.Config.AuthStream slot; a Watch sends
// only what the caller may view.
func (g *Guard) StreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	m, ok := methods[info.FullMethod]
	if !ok {
		return apierr.PermissionDenied("undeclared", info.FullMethod)
	}
	if !probe(info.FullMethod) {
		if err := g.refuseFlood(ss.Context(), info.FullMethod); err != nil {
			return err
		}
	}
	if m.Access == Public {
		return handler(srv, ss)
	}
	// The request is the stream's first message: receive it here to decide,
	// and hand it to the handler when it asks.
	if m.NewRequest == nil {
		return apierr.PermissionDenied("undeclared", info.FullMethod)
	}
	req := m.NewRequest()
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	c, _, err := g.admit(ss.Context(), m, req)
	if err != nil {
		if c.Principal == "" {
			g.audit.refused.spend(hostOf(grpcserver.PeerAddress(ss.Context())))
		}
		return err
	}
	w := &guardedStream{ServerStream: ss, ctx: WithCaller(ss.Context(), c), first: req}
	if m.Keep != nil {
		keep := g.viewFilter(c, m.Perm)
		w.keep = func(msg any) bool { return m.Keep(g, msg, keep) }
	}
	return handler(srv, w)
}

// admit authenticates the call and checks the method's permission on its
// target.
func (g *Guard) admit(ctx context.Context, m Method, req any) (Caller, Target, error) {
	c, err := g.authenticate(ctx, m)
	if err != nil || m.Access == Authenticated {
		return c, Target{}, err
	}
	t := m.Target(g, req)
	if c.Bound.Type != "" && c.Bound.Workload != t.Resource {
		// A tool ticket or session reaches its own workload only.
		return c, t, apierr.PermissionDenied(m.Perm.String(), t.Resource)
	}
	if m.Access == NodeAgentOnly {
		return c, t, m.Check(ctx, g, c, req)
	}
	var attrs func() (Attrs, error)
	if m.Attrs != nil {
		attrs = func() (Attrs, error) { return m.Attrs(ctx, g, c, req) }
	}
	ok, err := g.Allowed(c, m.Perm, t, attrs)
	if !ok && err == nil && (m.Filter != nil || m.Keep != nil) {
		// A List or Watch needs the permission somewhere in the target, if
		// only on some items (the caller's own): the filter keeps those.
		ok = g.holdsAny(c, m.Perm, t)
	}
	if err != nil {
		return c, t, err
	}
	if !ok {
		return c, t, apierr.PermissionDenied(m.Perm.String(), t.Resource)
	}
	if m.Check != nil {
		if err := m.Check(ctx, g, c, req); err != nil {
			return c, t, err
		}
	}
	return c, t, nil
}

type guardedStream struct {
	grpc.ServerStream
	ctx   context.Context
	first any // the request, already received
	keep  func(msg any) bool
}

func (s *guardedStream) Context() context.Context { return s.ctx }

func (s *guardedStream) RecvMsg(m any) error {
	if s.first != nil {
		src := s.first
		s.first = nil
		dst, ok := m.(proto.Message)
		if !ok {
			return fmt.Errorf("auth: cannot receive into %T", m)
		}
		proto.Reset(dst)
		proto.Merge(dst, src.(proto.Message))
		return nil
	}
	return s.ServerStream.RecvMsg(m)
}

func (s *guardedStream) SendMsg(m any) error {
	if s.keep != nil && !s.keep(m) {
		return nil
	}
	return s.ServerStream.SendMsg(m)
}

// auditEvent is the event of a call by c, without its outcome.
func (g *Guard) auditEvent(ctx context.Context, c Caller, method, resource string) *identityv1.AuditEvent {
	now := g.now()
	return &identityv1.AuditEvent{
		Name: "auditEvents/" + g.audit.eventID(now), CreateTime: timestamppb.New(now),
		Principal: c.Principal, Method: method, Resource: resource,
		PeerAddress: grpcserver.PeerAddress(ctx), RequestId: grpcserver.RequestID(ctx)}
}

// auditCall records the outcome of a call that changed nothing (refused, or
// a sign-in) in the background: a sign-in alone, a refused call in the
// aggregate of its kind (refused.go).
func (g *Guard) auditCall(ctx context.Context, c Caller, method, resource string, err error) {
	ev := g.auditEvent(ctx, c, method, resource)
	ev.StatusCode, ev.ErrorReason = int32(apierr.Code(err)), apierr.Reason(err)
	if err != nil {
		g.audit.refused.add(bounded(ev))
		return
	}
	g.audit.record(ev)
}

// auditLogin records a sign-in: who it was for (never a secret). A password
// sign-in's user field is what was typed, often the password itself put in
// the wrong box, so it is never recorded: a sign-in that succeeds names the
// user it resolved to, one that fails names none (its peer address and
// time remain).
func (g *Guard) auditLogin(ctx context.Context, req, resp any, err error) {
	c := Caller{}
	if r, ok := resp.(*identityv1.LoginResponse); ok && err == nil {
		c.Principal = r.GetPrincipal()
	}
	resource := ""
	if r, ok := req.(*identityv1.LoginRequest); ok && r.GetClientCredentials() != nil {
		resource = "clientId:" + r.GetClientCredentials().GetClientId()
	}
	if resource == "" {
		resource = c.Principal
	}
	g.auditCall(ctx, c, identitySvc+"Login", resource, err)
}
