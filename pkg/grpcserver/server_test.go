package grpcserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

func TestReflection_listsTheServices(t *testing.T) {
	e := start(t)
	stream, err := reflectionv1.NewServerReflectionClient(e.conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{
		"runway.quota.v1.QuotaService", "grpc.health.v1.Health",
		"grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, without %s", names, want)
		}
	}
	// A service's file descriptor resolves too (what grpcurl describe needs).
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "runway.quota.v1.QuotaService"},
	}); err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("no file descriptor for QuotaService: %v %v", err, resp.GetErrorResponse())
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}

	// Older grpcurl builds speak v1alpha.
	old, err := reflectionv1alpha.NewServerReflectionClient(e.conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Send(&reflectionv1alpha.ServerReflectionRequest{
		MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	if resp, err := old.Recv(); err != nil || len(resp.GetListServicesResponse().GetService()) == 0 {
		t.Errorf("v1alpha reflection: %v", err)
	}
	_ = old.CloseSend()
}

func TestHealth(t *testing.T) {
	e := start(t)
	client := healthpb.NewHealthClient(e.conn)
	for _, service := range []string{"", "runway.quota.v1.QuotaService"} {
		resp, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, %v; want SERVING", service, resp.GetStatus(), err)
		}
	}
	if _, err := client.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "runway.nope.v1.Nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check(unknown) = %v, want NotFound", err)
	}

	// A server stream through the shared listener, with the request id in
	// its header: the streaming half of the chain.
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(t.Context(), "x-request-id", "watch-1"))
	defer cancel()
	watch, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "runway.quota.v1.QuotaService"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := watch.Recv()
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch = %v, %v; want SERVING", resp.GetStatus(), err)
	}
	header, err := watch.Header()
	if err != nil || !slices.Equal(header.Get("x-request-id"), []string{"watch-1"}) {
		t.Errorf("stream header x-request-id = %v (%v), want [watch-1]", header.Get("x-request-id"), err)
	}
}

// Calls in flight when Serve's context ends finish (gRPC and REST alike);
// new connections are refused meanwhile; nothing is left running after.
func TestServe_gracefulShutdown(t *testing.T) {
	e := start(t)
	grpcDone := make(chan error, 1)
	go func() {
		_, err := e.client.ListProjects(context.Background(), &quotav1.ListProjectsRequest{PageToken: "hold"})
		grpcDone <- err
	}()
	restDone := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", "http://"+e.addr+"/v1/projects?pageToken=hold", nil)
		resp, err := e.http.Do(req)
		if err != nil {
			restDone <- -1
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		restDone <- resp.StatusCode
	}()
	<-e.quota.entered
	<-e.quota.entered

	e.stop()
	waitFor(t, "the listener to close", func() bool {
		c, err := net.Dial("tcp", e.addr)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	})
	select {
	case err := <-e.stopped:
		t.Fatalf("Serve returned (%v) with calls still in flight", err)
	default:
	}
	close(e.quota.release)

	if err := <-grpcDone; err != nil {
		t.Errorf("in-flight gRPC call: %v", err)
	}
	if code := <-restDone; code != http.StatusOK {
		t.Errorf("in-flight REST call: HTTP %d", code)
	}
	if err := <-e.stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
	e.stopped <- nil // for the cleanup in start
}

// A call that outlives ShutdownTimeout (a watch) is cancelled, and Serve
// still returns.
func TestServe_shutdownTimeoutCancelsLongCalls(t *testing.T) {
	e := start(t, func(c *grpcserver.Config) { c.ShutdownTimeout = 50 * time.Millisecond })
	watch, err := healthpb.NewHealthClient(e.conn).Watch(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	e.stop()
	if err := <-e.stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
	e.stopped <- nil
	for {
		// NOT_SERVING may arrive first; then the stream ends.
		if _, err := watch.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				t.Error("the watch ended cleanly; want it cancelled")
			}
			break
		}
	}
	if !strings.Contains(e.logs.String(), "shutdown timeout") {
		t.Errorf("the forced stop was not logged:\n%s", e.logs.String())
	}
}

func TestServer_misuse(t *testing.T) {
	if _, err := grpcserver.New(grpcserver.Config{}); err == nil {
		t.Error("New without Listen succeeded")
	}

	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		_ = c.Close()
		t.Error("the listener is still open after Close")
	}
	if err := srv.Serve(t.Context()); err == nil {
		t.Error("Serve after Close succeeded")
	}
	defer func() {
		if recover() == nil {
			t.Error("Register after Serve did not panic")
		}
	}()
	srv.Register(func(*grpc.Server) {})
}

func TestServer_gatewayRegistrationErrorStopsServe(t *testing.T) {
	srv, err := grpcserver.New(grpcserver.Config{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv.RegisterGateway(func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error { return errors.New("no") })
	if err := srv.Serve(t.Context()); err == nil || !strings.Contains(err.Error(), "no") {
		t.Errorf("Serve = %v, want the registration error", err)
	}
}
