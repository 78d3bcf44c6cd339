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
// (TLS, the 1 MiB message and REST body limit, the timeouts, request ids,
// the access log, the web UI). It holds what it passes to the same bounds
// as the services: a call names a method of the API (else Unimplemented,
// before anything counts it, so a caller cannot grow the metrics' label
// sets), and each request message is decoded as that method's input and
// checked by pkg/bounds (INVALID_ARGUMENT naming the field) before it goes
// on. A refusal of the front door's own reaches the client as it is, and
// ends the backend's call.
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
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/runwayhq/runway/pkg/apierr"
	"github.com/runwayhq/runway/pkg/bounds"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

// Routes maps a full gRPC service name ("runway.quota.v1.QuotaService") to
// the connection of the service that serves it.
type Routes map[string]*grpc.ClientConn

// ServerOptions make a grpc.Server (through grpcserver.Config.ServerOptions)
// pass every call for a service it does not serve itself to routes. The
// server keeps its own services (health, reflection): they decode as
// usual. Interceptors given after these (metrics) see only calls of known
// methods.
func ServerOptions(routes Routes) []grpc.ServerOption {
	p := &proxy{routes: routes}
	return []grpc.ServerOption{grpc.ForceServerCodecV2(codec{}), grpc.UnknownServiceHandler(p.handle),
		grpc.ChainStreamInterceptor(knownMethods)}
}

// knownMethods refuses a stream for a method this binary has no descriptor
// of (every method of the API, health and reflection have one).
func knownMethods(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if _, err := methodOf(info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// methodOf is the descriptor of a full method ("/pkg.Service/Method").
func methodOf(full string) (protoreflect.MethodDescriptor, error) {
	service, method, _ := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err == nil {
		if sd, ok := d.(protoreflect.ServiceDescriptor); ok {
			if md := sd.Methods().ByName(protoreflect.Name(method)); md != nil {
				return md, nil
			}
		}
	}
	return nil, status.Errorf(codes.Unimplemented, "no service behind this address serves %s", full)
}

// checkFrame decodes a request message as the method's input and holds it
// to pkg/bounds, as the service behind will.
func checkFrame(input protoreflect.MessageDescriptor, f *frame) error {
	m := dynamicpb.NewMessage(input)
	if err := proto.Unmarshal(f.data, m); err != nil {
		return apierr.InvalidField("body", fmt.Sprintf("is not a valid %s: %v", input.FullName(), err))
	}
	return bounds.Check(m)
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
	desc, err := methodOf(method)
	if err != nil {
		return err
	}
	service := string(desc.Parent().FullName())
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
	// away or sends what cannot be read or is out of bounds ends the
	// backend's call, and the client gets why.
	refused := make(chan error, 1)
	go func() {
		for {
			f := new(frame)
			err := ss.RecvMsg(f)
			if errors.Is(err, io.EOF) {
				_ = cs.CloseSend()
				return
			}
			if err == nil {
				err = checkFrame(desc.Input(), f)
			}
			if err != nil {
				refused <- err
				cancel()
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
		return refusedOr(refused, backendError(cs, ss, err))
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
			return refusedOr(refused, backendError(cs, ss, err))
		}
		if err := ss.SendMsg(f); err != nil {
			return err
		}
	}
}

// refusedOr is the front door's own refusal of the client's message, when
// that is what ended the call, else err.
func refusedOr(refused <-chan error, err error) error {
	select {
	case r := <-refused:
		return r
	default:
		return err
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
