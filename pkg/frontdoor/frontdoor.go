// Package frontdoor is the one address of a split deployment: where each
// service runs as its own `runway serve`, the front door takes every call,
// gRPC and REST, and passes it to the service that owns it, so that the CLI,
// the SDK and the web UI need one --server.
//
//	client ──gRPC──► front door ── UnknownServiceHandler: full method
//	                    ▲           "/runway.quota.v1.QuotaService/…" ──►
//	                    │           Routes["runway.quota.v1.QuotaService"]
//	client ──REST──► its gateway mux (every service's handlers) ── loopback
//	                 gRPC to itself, then as above
//
// It is a transparent proxy: messages pass as raw bytes (no decoding, so
// it never lags behind the services' contracts), metadata (the bearer
// token, the request id) passes on, and the backend's status, headers and
// trailers come back as they are. The services authenticate and authorise
// each call themselves, as they do without a front door; the front door
// adds only the client's address (x-forwarded-for), which a service
// believes when the front door is one of its --trusted-proxies.
//
// The front door runs on pkg/grpcserver, so its listener is the services'
// (TLS, the message size limit, request ids, the access log, the web UI).
package frontdoor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // the codec frames fall back to
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/runwayhq/runway/pkg/grpcserver"
)

// Routes maps a full gRPC service name ("runway.quota.v1.QuotaService") to
// the connection of the service that serves it.
type Routes map[string]*grpc.ClientConn

// ServerOptions make a grpc.Server (through grpcserver.Config.ServerOptions)
// pass every call for a service it does not serve itself to routes. The
// server keeps its own services (health, reflection): they decode as
// usual.
func ServerOptions(routes Routes) []grpc.ServerOption {
	p := &proxy{routes: routes}
	return []grpc.ServerOption{grpc.ForceServerCodecV2(codec{}), grpc.UnknownServiceHandler(p.handle)}
}

type proxy struct{ routes Routes }

// Metadata the front door does not pass on: HTTP/2 and gRPC's own, set
// again by the next hop, and the client's forwarded addresses, which it
// replaces by the one it believes.
var hopHeaders = []string{":authority", "content-type", "user-agent", "te", "x-forwarded-for", "x-runway-rest-peer"}

func (p *proxy) handle(_ any, ss grpc.ServerStream) error {
	method, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "frontdoor: a call without a method")
	}
	service, _, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	conn := p.routes[service]
	if conn == nil {
		return status.Errorf(codes.Unimplemented, "no service behind this address serves %s", service)
	}
	ctx := ss.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	md = md.Copy()
	for _, h := range hopHeaders {
		delete(md, h)
	}
	for k := range md {
		if strings.HasPrefix(k, "grpc-") {
			delete(md, k)
		}
	}
	if addr := grpcserver.PeerAddress(ctx); addr != "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
		md.Set("x-forwarded-for", addr)
	}
	// One request id from the client to the service, in both logs.
	md.Set(grpcserver.RequestIDHeader, grpcserver.RequestID(ctx))
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, md))
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method,
		grpc.ForceCodecV2(codec{}))
	if err != nil {
		return backendError(nil, ss, err)
	}
	// Client to backend, until the client half-closes; a client that goes
	// away or sends what cannot be read ends the backend's call.
	go func() {
		for {
			f := new(frame)
			if err := ss.RecvMsg(f); err != nil {
				if errors.Is(err, io.EOF) {
					_ = cs.CloseSend()
				} else {
					cancel()
				}
				return
			}
			if cs.SendMsg(f) != nil {
				return // the backend ended the call: RecvMsg below says how
			}
		}
	}()
	// Backend to client, until the backend ends the call.
	h, err := cs.Header()
	if err != nil {
		return backendError(cs, ss, err)
	}
	delete(h, grpcserver.RequestIDHeader) // the front door's own is the same id
	if err := ss.SendHeader(h); err != nil {
		return err
	}
	for {
		f := new(frame)
		if err := cs.RecvMsg(f); err != nil {
			if errors.Is(err, io.EOF) {
				ss.SetTrailer(cs.Trailer())
				return nil
			}
			return backendError(cs, ss, err)
		}
		if err := ss.SendMsg(f); err != nil {
			return err
		}
	}
}

// backendError is the backend's status, with its trailers.
func backendError(cs grpc.ClientStream, ss grpc.ServerStream, err error) error {
	if cs != nil {
		ss.SetTrailer(cs.Trailer())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Unavailable, fmt.Sprintf("frontdoor: the service is unreachable: %v", err))
}

// frame is one message as it is on the wire.
type frame struct{ data []byte }

// codec passes frames through as bytes and every other message (the front
// door's own services: health, reflection) to the proto codec.
type codec struct{}

func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f.data)}, nil
	}
	return encoding.GetCodecV2("proto").Marshal(v)
}

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*frame); ok {
		f.data = data.Materialize()
		return nil
	}
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}
