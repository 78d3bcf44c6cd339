package frontdoor_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/bounds"
	"github.com/runwayhq/runway/pkg/frontdoor"
	"github.com/runwayhq/runway/pkg/grpcserver"
)

// counting is a quota service with no limits of its own (a plain
// grpc.Server): whatever reaches it passed the front door's.
type counting struct {
	quotav1.UnimplementedQuotaServiceServer
	calls atomic.Int32
}

func (c *counting) GetProject(_ context.Context, r *quotav1.GetProjectRequest) (*quotav1.Project, error) {
	c.calls.Add(1)
	return &quotav1.Project{Name: r.GetName()}, nil
}

func (c *counting) CreateProject(_ context.Context, r *quotav1.CreateProjectRequest) (*quotav1.Project, error) {
	c.calls.Add(1)
	return r.GetProject(), nil
}

// The front door holds what it passes to the services' bounds: a message
// over 1 MiB is RESOURCE_EXHAUSTED, a field over pkg/bounds' limit is
// INVALID_ARGUMENT naming it, a method the API does not have is
// UNIMPLEMENTED, a REST body over 1 MiB is 413, a REST body that does not
// arrive in time is 408, and none of them reaches the service.
func TestFrontDoorBounds(t *testing.T) {
	svc := &counting{}
	q := backend(t, func(s *grpc.Server) { quotav1.RegisterQuotaServiceServer(s, svc) })
	conn, addr := frontDoorAt(t, frontdoor.Routes{quotav1.QuotaService_ServiceDesc.ServiceName: q},
		grpcserver.Config{BodyTimeout: 300 * time.Millisecond}, quotav1.RegisterQuotaServiceHandler)
	client := quotav1.NewQuotaServiceClient(conn)

	if _, err := client.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/a"}); err != nil {
		t.Fatalf("GetProject within bounds: %v", err)
	}
	_, err := client.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: strings.Repeat("a", grpcserver.DefaultMaxMessageBytes+1)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a message over 1 MiB: %v, want ResourceExhausted", err)
	}
	_, err = client.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: strings.Repeat("a", bounds.String+1)})
	if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "name") {
		t.Errorf("a name over %d bytes: %v, want InvalidArgument naming the field", bounds.String, err)
	}
	err = conn.Invoke(t.Context(), "/runway.quota.v1.QuotaService/NoSuchMethod", &quotav1.GetProjectRequest{}, &quotav1.Project{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("a method the API does not have: %v, want Unimplemented", err)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("the service got %d calls, want only the one within bounds", n)
	}

	body := `{"description":"` + strings.Repeat("a", grpcserver.DefaultMaxMessageBytes) + `"}`
	resp, err := http.Post("http://"+addr+"/v1/projects?project_id=big", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a REST body over 1 MiB: %s, want 413", resp.Status)
	}

	// A client that sends its headers and then holds back its body.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /v1/projects?project_id=slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	slow, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a client holding back its body got no answer: %v", err)
	}
	_ = slow.Body.Close()
	if slow.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a REST body that does not arrive: %s, want 408", slow.Status)
	}
	if n := svc.calls.Load(); n != 1 {
		t.Errorf("the service got %d calls, want only the one within bounds", n)
	}
}
