package grpcserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/bounds"
)

// The chain, outermost first (see the package comment for why this order).

func (s *Server) unaryChain() []grpc.UnaryServerInterceptor {
	chain := []grpc.UnaryServerInterceptor{s.recoverUnary, s.logUnary, s.boundsUnary}
	if s.cfg.Auth != nil {
		chain = append(chain, s.authUnary)
	}
	return append(chain, s.mapUnary)
}

func (s *Server) streamChain() []grpc.StreamServerInterceptor {
	chain := []grpc.StreamServerInterceptor{s.recoverStream, s.logStream, s.boundsStream}
	if s.cfg.AuthStream != nil {
		chain = append(chain, s.authStream)
	}
	return append(chain, s.mapStream)
}

// recover: a panic becomes Internal, with the value and stack in the log.

func (s *Server) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	ctx, c := withCall(ctx)
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, s.panicked(ctx, c, info.FullMethod, p)
		}
	}()
	return handler(ctx, req)
}

func (s *Server) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	ctx, c := withCall(ss.Context())
	defer func() {
		if p := recover(); p != nil {
			err = s.panicked(ctx, c, info.FullMethod, p)
		}
	}()
	return handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
}

func (s *Server) panicked(ctx context.Context, c *call, method string, p any) error {
	s.log.LogAttrs(ctx, slog.LevelError, "panic in a call",
		slog.String("method", method), slog.String("requestId", c.requestID),
		slog.String("panic", fmt.Sprint(p)), slog.String("stack", string(debug.Stack())))
	return apierr.ToStatus(apierr.Internal(c.requestID), s.domainFor(method)).Err()
}

// request id and access log.

func (s *Server) logUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	id := s.startCall(ctx)
	_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, id))
	start, finished := time.Now(), false
	defer func() { s.accessLog(ctx, info.FullMethod, id, start, err, finished) }()
	resp, err = handler(ctx, req)
	finished = true
	return resp, err
}

func (s *Server) logStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	ctx := ss.Context()
	id := s.startCall(ctx)
	_ = ss.SetHeader(metadata.Pairs(RequestIDHeader, id))
	start, finished := time.Now(), false
	defer func() { s.accessLog(ctx, info.FullMethod, id, start, err, finished) }()
	err = handler(srv, ss)
	finished = true
	return err
}

// startCall picks the request id and shares it with the recover interceptor.
func (s *Server) startCall(ctx context.Context) string {
	id := requestID(ctx)
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		c.requestID, c.peer = id, s.peerAddress(ctx)
	}
	return id
}

// accessLog writes one line per call. finished is false when the handler
// panicked: the recover interceptor turns that into Internal.
func (s *Server) accessLog(ctx context.Context, method, id string, start time.Time, err error, finished bool) {
	code := status.Code(err)
	if !finished {
		code = codes.Internal
	}
	level := slog.LevelInfo
	switch {
	case code == codes.Internal || code == codes.Unknown || code == codes.DataLoss:
		level = slog.LevelError
	case strings.HasPrefix(method, "/grpc.health.") || strings.HasPrefix(method, "/grpc.reflection."):
		level = slog.LevelDebug // probes and grpcurl would drown the log
	}
	attrs := []slog.Attr{
		slog.String("method", method), slog.String("code", code.String()),
		slog.Duration("duration", time.Since(start)), slog.String("requestId", id),
	}
	if !finished {
		attrs = append(attrs, slog.Bool("panic", true))
	} else if reason := apierr.Reason(err); reason != "" {
		attrs = append(attrs, slog.String("reason", reason))
	}
	s.log.LogAttrs(ctx, level, "rpc", attrs...)
}

// bounds: every request message within pkg/bounds' limits, before anything
// (the auth slot, the audit log, the handler) holds on to it.

func (s *Server) boundsUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if m, ok := req.(proto.Message); ok {
		if err := bounds.Check(m); err != nil {
			return nil, s.mapError(ctx, info.FullMethod, err)
		}
	}
	return handler(ctx, req)
}

func (s *Server) boundsStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &boundedStream{ServerStream: ss, s: s, method: info.FullMethod})
}

type boundedStream struct {
	grpc.ServerStream
	s      *Server
	method string
}

func (b *boundedStream) RecvMsg(m any) error {
	if err := b.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if msg, ok := m.(proto.Message); ok {
		if err := bounds.Check(msg); err != nil {
			return b.s.mapError(b.Context(), b.method, err)
		}
	}
	return nil
}

// auth slot: errors it returns itself (not from the handler, which are
// already statuses) are mapped like handler errors.

func (s *Server) authUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := s.cfg.Auth(ctx, req, info, handler)
	return resp, s.mapError(ctx, info.FullMethod, err)
}

func (s *Server) authStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return s.mapError(ss.Context(), info.FullMethod, s.cfg.AuthStream(srv, ss, info, handler))
}

// apierr mapping.

func (s *Server) mapUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	return resp, s.mapError(ctx, info.FullMethod, err)
}

func (s *Server) mapStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return s.mapError(ss.Context(), info.FullMethod, handler(srv, ss))
}

// mapError turns err into a status error with apierr.ToStatus; statuses
// pass through unchanged, so mapping twice is harmless.
func (s *Server) mapError(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	return apierr.ToStatus(err, s.domainFor(method),
		apierr.WithRequestID(RequestID(ctx)), apierr.WithLogger(s.log)).Err()
}

// serverStream carries the context with the call record to the handler.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }
