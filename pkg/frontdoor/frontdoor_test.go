package frontdoor_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/frontdoor"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

// quota answers GetProject with what it was sent: the project's
// description is the metadata the call arrived with.
type quota struct {
	quotav1.UnimplementedQuotaServiceServer
}

func (quota) GetProject(ctx context.Context, r *quotav1.GetProjectRequest) (*quotav1.Project, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if r.GetName() == "projects/missing" {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("why", "no such project"))
		return nil, status.Error(codes.NotFound, "project projects/missing not found")
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs("backend", "quota"))
	return &quotav1.Project{Name: r.GetName(), Description: first(md, "authorization") + "|" + first(md, "x-forwarded-for") +
		"|" + first(md, "x-request-id")}, nil
}

func first(md metadata.MD, k string) string {
	if v := md.Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

// workloads streams three events per watch.
type workloads struct {
	workloadv1.UnimplementedWorkloadServiceServer
}

func (workloads) WatchWorkloads(r *workloadv1.WatchWorkloadsRequest, st grpc.ServerStreamingServer[workloadv1.WatchWorkloadsResponse]) error {
	for i := range 3 {
		if err := st.Send(&workloadv1.WatchWorkloadsResponse{ResumeToken: r.GetParent() + "/" + strconv.Itoa(i)}); err != nil {
			return err
		}
	}
	return nil
}

func backend(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// frontDoor serves routes on a grpcserver listener, as `runway gateway`
// does, and returns a client connection to it.
func frontDoor(t *testing.T, routes frontdoor.Routes) *grpc.ClientConn {
	conn, _ := frontDoorAt(t, routes, grpcserver.Config{})
	return conn
}

// frontDoorAt is frontDoor with cfg's settings and REST handlers, and its
// address.
func frontDoorAt(t *testing.T, routes frontdoor.Routes, cfg grpcserver.Config, gateways ...grpcserver.GatewayFunc) (*grpc.ClientConn, string) {
	t.Helper()
	cfg.Listen, cfg.ServerOptions = "127.0.0.1:0", frontdoor.ServerOptions(routes)
	srv, err := grpcserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gateways {
		srv.RegisterGateway(g)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	conn, err := grpc.NewClient("passthrough:///"+srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn, srv.Addr()
}

func TestFrontDoorRoutesByService(t *testing.T) {
	q := backend(t, func(s *grpc.Server) { quotav1.RegisterQuotaServiceServer(s, quota{}) })
	w := backend(t, func(s *grpc.Server) { workloadv1.RegisterWorkloadServiceServer(s, workloads{}) })
	conn := frontDoor(t, frontdoor.Routes{
		quotav1.QuotaService_ServiceDesc.ServiceName:       q,
		workloadv1.WorkloadService_ServiceDesc.ServiceName: w,
	})

	// A unary call: metadata on, the client's address in place of the one
	// it claims, one request id, the backend's header back.
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer tok",
		"x-forwarded-for", "10.9.9.9", "x-request-id", "req-1")
	var header metadata.MD
	p, err := quotav1.NewQuotaServiceClient(conn).GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/a"}, grpc.Header(&header))
	if err != nil {
		t.Fatalf("GetProject through the front door: %v", err)
	}
	if want := "Bearer tok|127.0.0.1|req-1"; p.GetName() != "projects/a" || p.GetDescription() != want {
		t.Errorf("the backend got %q (%s), want %q", p.GetDescription(), p.GetName(), want)
	}
	if first(header, "backend") != "quota" || len(header.Get("x-request-id")) != 1 || first(header, "x-request-id") != "req-1" {
		t.Errorf("response header %v: want the backend's, and the request id once", header)
	}

	// The backend's error comes back as it is, with its trailer.
	var trailer metadata.MD
	_, err = quotav1.NewQuotaServiceClient(conn).GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/missing"},
		grpc.Trailer(&trailer))
	if s, _ := status.FromError(err); s.Code() != codes.NotFound || s.Message() != "project projects/missing not found" {
		t.Errorf("GetProject(missing): %v, want the backend's NotFound", err)
	}
	if first(trailer, "why") != "no such project" {
		t.Errorf("trailer %v: want the backend's", trailer)
	}

	// A server stream, to its end.
	st, err := workloadv1.NewWorkloadServiceClient(conn).WatchWorkloads(t.Context(), &workloadv1.WatchWorkloadsRequest{Parent: "projects/a"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("WatchWorkloads through the front door: %v", err)
		}
		got = append(got, r.GetResumeToken())
	}
	if len(got) != 3 || got[0] != "projects/a/0" || got[2] != "projects/a/2" {
		t.Errorf("stream: %v, want projects/a/0..2", got)
	}

	// A service nothing serves here.
	_, err = workloadv1.NewGovernanceServiceClient(conn).GetPolicy(t.Context(), &workloadv1.GetPolicyRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("a call for a service without a backend: %v, want Unimplemented", err)
	}
}

// A backend that is down is Unavailable, and the front door stays up.
func TestFrontDoorBackendDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	down, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	conn := frontDoor(t, frontdoor.Routes{quotav1.QuotaService_ServiceDesc.ServiceName: down})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err = quotav1.NewQuotaServiceClient(conn).GetProject(ctx, &quotav1.GetProjectRequest{Name: "projects/a"})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("GetProject with the quota service down: %v, want Unavailable", err)
	}
}
