package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/runwayhq/runway/cmd/runway/server"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/services/identity"
)

// TestServeTLS: `runway serve identity --tls-cert-file --tls-key-file`
// serves gRPC and REST over TLS only. The SDK with the CA file signs in and
// calls; a reflection client (what grpcurl does) lists the services; the CLI
// binary with RUNWAY_CA_FILE signs in and answers whoami; REST works over
// HTTPS; a plaintext client, or one that does not trust the CA, is refused.
// With --tls-client-ca-file a client without a certificate is refused.
func TestServeTLS(t *testing.T) {
	files := tlstest.New(t)
	etcd := etcdtest.New(t)
	var printed bytes.Buffer
	addr := serve(t, server.ServeConfig{Service: server.Identity, EtcdEndpoints: []string{etcd.Endpoint}, Out: &printed,
		Identity: identity.Config{BcryptCost: bcrypt.MinCost},
		TLS:      server.ServerTLS{CertFile: files.Cert, KeyFile: files.Key}})
	_, password, _ := strings.Cut(strings.TrimSpace(printed.String()), "one-time password: ")

	// The SDK, given the CA.
	c, err := sdk.Dial(t.Context(), sdk.Config{Server: "https://" + addr, CAFile: files.CA})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.IdentityService.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
		Password: &identityv1.PasswordCredentials{User: "admin", Password: password, NewPassword: "a new password of the admin"}}})
	if err != nil {
		t.Fatalf("Login over TLS: %v", err)
	}
	authed, err := sdk.Dial(t.Context(), sdk.Config{Server: "https://" + addr, CAFile: files.CA, Token: r.GetAccessToken()})
	if err != nil {
		t.Fatal(err)
	}
	defer authed.Close()
	eventuallyOK(t, "GetCaller over TLS", func() error {
		_, err := authed.IdentityService.GetCaller(t.Context(), &identityv1.GetCallerRequest{})
		return err
	})

	// Reflection, as grpcurl -cacert does.
	pool, err := grpcserver.LoadCAs(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(
		credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := st.Recv(); err != nil || !strings.Contains(resp.String(), "runway.identity.v1.IdentityService") {
		t.Fatalf("reflection over TLS: %v, %v", resp, err)
	}
	_ = st.CloseSend()

	// REST over HTTPS (through the gateway's pinned loopback).
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 10 * time.Second}
	defer https.CloseIdleConnections()
	defer http.DefaultClient.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/v1/caller", nil)
	req.Header.Set("Authorization", "Bearer "+r.GetAccessToken())
	resp, err := https.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "users/admin") {
		t.Errorf("REST over HTTPS: %d %s", resp.StatusCode, b)
	}

	// The CLI binary.
	bin := buildRunway(t)
	home := t.TempDir()
	cli := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "RUNWAY_SERVER=https://"+addr, "RUNWAY_CA_FILE="+files.CA,
			"RUNWAY_CONFIG="+filepath.Join(home, "config.json"), "RUNWAY_TOKEN=")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli("a new password of the admin\n", "login", "--user", "admin"); err != nil || !strings.Contains(out, "signed in as users/admin") {
		t.Fatalf("runway login over TLS: %v\n%s", err, out)
	}
	if out, err := cli("", "whoami"); err != nil || !strings.Contains(out, "system-admin") {
		t.Errorf("runway whoami over TLS: %v\n%s", err, out)
	}

	// Refused: plaintext, and TLS without the CA.
	plain, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := identityv1.NewIdentityServiceClient(plain).ListRoles(t.Context(), &identityv1.ListRolesRequest{}); err == nil {
		t.Error("a plaintext gRPC call to the TLS server succeeded")
	}
	if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plaintext HTTP to the TLS server succeeded")
		}
	}
	untrusted, err := sdk.Dial(t.Context(), sdk.Config{Server: "https://" + addr})
	if err != nil {
		t.Fatal(err)
	}
	defer untrusted.Close()
	if _, err := untrusted.IdentityService.ListRoles(t.Context(), &identityv1.ListRolesRequest{}); err == nil {
		t.Error("a client that does not trust the CA got through")
	}

	// Mutual TLS: a client without a certificate is refused, one with the
	// CA's client certificate gets through.
	mtls := serve(t, server.ServeConfig{Service: server.Quota, EtcdEndpoints: []string{etcd.Endpoint},
		TLS: server.ServerTLS{CertFile: files.Cert, KeyFile: files.Key, ClientCAFile: files.CA}})
	health := func(cfg *tls.Config) error {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		defer c.CloseIdleConnections()
		resp, err := c.Get("https://" + mtls + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := health(&tls.Config{RootCAs: pool}); err == nil {
		t.Error("mutual TLS: a client without a certificate got through")
	}
	clientCert, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := health(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}}); err != nil {
		t.Errorf("mutual TLS with the client certificate: %v", err)
	}

	// Service to service: the workload service asks the mutual-TLS quota
	// service whether a project exists, over TLS with its certificate.
	wl := serve(t, server.ServeConfig{Service: server.Workload, EtcdEndpoints: []string{etcd.Endpoint}, QuotaServer: mtls,
		TLS: server.ServerTLS{CertFile: files.Cert, KeyFile: files.Key, CAFile: files.CA}})
	wc, err := sdk.Dial(t.Context(), sdk.Config{Server: "https://" + wl, CAFile: files.CA, Token: r.GetAccessToken()})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	_, err = wc.WorkloadService.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/nope", WorkloadId: "w",
		Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"true"}}}})
	if sdk.Reason(err) != "PROJECT_NOT_FOUND" {
		t.Errorf("a create through the workload service to the mutual-TLS quota service: %v, want PROJECT_NOT_FOUND", err)
	}
}

// `runway dev` serves plaintext, so only on loopback; its etcd answers on a
// unix socket only its user may open, not on a TCP port.
func TestDevLoopbackOnly(t *testing.T) {
	err := server.RunDev(t.Context(), server.DevConfig{DataDir: t.TempDir(), Listen: "0.0.0.0:0", Logger: quiet}, nil)
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("runway dev on 0.0.0.0: %v, want refused", err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- server.RunDev(ctx, server.DevConfig{DataDir: dir, Listen: "127.0.0.1:0", Logger: quiet,
			Identity: identity.Config{BcryptCost: bcrypt.MinCost}, EtcdOptions: []etcdtest.Option{etcdtest.WithTestSpeedups()}},
			func(string, string) { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("RunDev: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunDev: %v", err)
		}
	}()
	fi, err := os.Stat(filepath.Join(dir, "etcd", "client.sock"))
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("the dev etcd socket: %v, %v; want a socket with mode 0600", fi, err)
	}
	if d, err := os.Stat(filepath.Join(dir, "etcd")); err != nil || d.Mode().Perm() != 0o700 {
		t.Errorf("the dev etcd directory: %v, %v; want mode 0700", d, err)
	}
}
