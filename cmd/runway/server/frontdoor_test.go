package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/runwayhq/runway/cmd/runway/server"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
)

type echoQuota struct {
	quotav1.UnimplementedQuotaServiceServer
}

func (echoQuota) GetProject(_ context.Context, r *quotav1.GetProjectRequest) (*quotav1.Project, error) {
	return &quotav1.Project{Name: r.GetName()}, nil
}

// TestFrontDoorMetrics: `runway gateway` has an operations listener like
// the services': its bearer token required, the calls it passed counted by
// method and code, and no series for a method the API does not have (a
// caller cannot grow the label sets).
func TestFrontDoorMetrics(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	backend := grpc.NewServer()
	quotav1.RegisterQuotaServiceServer(backend, echoQuota{})
	go func() { _ = backend.Serve(l) }()
	defer backend.Stop()

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs, opsAddrs := make(chan string, 1), make(chan string, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- server.FrontDoor(ctx, server.FrontDoorConfig{Listen: "127.0.0.1:0",
			Servers: map[string]string{server.Quota: l.Addr().String()},
			Metrics: server.MetricsConfig{Listen: "127.0.0.1:0", TokenFile: tokenFile, Ready: func(a string) { opsAddrs <- a }},
			Ready:   func(a string) { addrs <- a }})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("FrontDoor: %v", err)
		}
	}()
	opsAddr, addr := <-opsAddrs, <-addrs
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := quotav1.NewQuotaServiceClient(conn).GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/a"}); err != nil {
		t.Fatalf("GetProject through the gateway: %v", err)
	}
	for _, m := range []string{"/runway.quota.v1.QuotaService/MadeUp1", "/made.up.Service/X"} {
		if err := conn.Invoke(t.Context(), m, &quotav1.GetProjectRequest{}, &quotav1.Project{}); status.Code(err) != codes.Unimplemented {
			t.Errorf("%s: %v, want Unimplemented", m, err)
		}
	}

	get := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+opsAddr+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := plainHTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("wrong"); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics with a wrong token: %d, want 401", code)
	}
	code, body := get("s3cret")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics with the token: %d", code)
	}
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="GetProject",grpc_service="runway.quota.v1.QuotaService",grpc_type="bidi_stream"} 1`,
		`grpc_client_handled_total{grpc_code="OK",grpc_method="GetProject",grpc_service="runway.quota.v1.QuotaService",grpc_type="bidi_stream"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "MadeUp1") || strings.Contains(body, "made.up") {
		t.Errorf("metrics count a method the API does not have")
	}
}
