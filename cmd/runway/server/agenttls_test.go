package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/runwayhq/runway/cmd/runway/server"
	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/auth"
	"github.com/runwayhq/runway/pkg/grpcserver"
	"github.com/runwayhq/runway/pkg/grpcserver/tlstest"
	"github.com/runwayhq/runway/pkg/sdk"
)

// TestAgentTLS: `runway agent --tls-cert-file --tls-key-file
// --tls-client-ca-file` serves its pod output over mutual TLS only. A
// workload service given the CA and its certificate (`runway serve workload
// --tls-ca-file`) relays a running pod's output from it; one that reaches
// agents in plaintext (the dev composition's) finds no output there; a
// plaintext client, and a TLS client without a certificate, are refused by
// the agent itself. With --tls-agent-server-name the agent's certificate
// must carry that name.
func TestAgentTLS(t *testing.T) {
	files := tlstest.New(t)
	d, cli, dir, conn := startDevWithoutNodes(t)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.RunAgent(ctx, server.AgentConfig{Node: "node-1", EtcdEndpoints: cli.Endpoints(), GPUBackend: server.BackendSimulated,
			GPUs: 2, DataDir: filepath.Join(dir, "nodes", "node-1"), Listen: "127.0.0.1:0", Logger: quiet,
			TLS: server.ServerTLS{CertFile: files.Cert, KeyFile: files.Key, ClientCAFile: files.CA}})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("RunAgent: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("RunAgent did not stop within 30s")
		}
	})
	nodes := nodemanagerv1.NewNodeManagerServiceClient(conn)
	var agentAddr string
	eventually(t, "node-1 registered with its agent's address", func() string {
		n, err := nodes.GetNode(t.Context(), &nodemanagerv1.GetNodeRequest{Name: "nodes/node-1"})
		if err != nil {
			return err.Error()
		}
		if agentAddr = n.GetAgentAddress(); agentAddr == "" {
			return "no agent address"
		}
		return ""
	})

	d.project(t, "team-a", 2)
	const name = "projects/team-a/workloads/t1"
	if _, err := d.workload.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "t1",
		Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sh", "-c", "echo output over TLS; sleep 60"},
				Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}}); err != nil {
		t.Fatal(err)
	}

	// The workload service over TLS, with the CA and its certificate.
	wl := serve(t, server.ServeConfig{Service: server.Workload, EtcdEndpoints: cli.Endpoints(), QuotaServer: d.addr,
		TLS: server.ServerTLS{CertFile: files.Cert, KeyFile: files.Key, CAFile: files.CA}})
	c, err := sdk.Dial(t.Context(), sdk.Config{Server: "https://" + wl, CAFile: files.CA, Token: d.token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	readLogs := func(w workloadv1.WorkloadServiceClient) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		st, err := w.ReadWorkloadLogs(ctx, &workloadv1.ReadWorkloadLogsRequest{Name: name})
		if err != nil {
			return "", err
		}
		var out strings.Builder
		for {
			m, err := st.Recv()
			if err == io.EOF {
				return out.String(), nil
			}
			if err != nil {
				return out.String(), err
			}
			out.Write(m.GetData())
		}
	}
	eventually(t, "the pod's output through the workload service, over mutual TLS to the agent", func() string {
		out, err := readLogs(c.WorkloadService)
		if err != nil {
			return err.Error()
		}
		if !strings.Contains(out, "output over TLS") {
			return "output " + out
		}
		return ""
	})

	// --tls-agent-server-name: every agent's certificate must carry that
	// name (the test certificate names localhost and 127.0.0.1).
	for serverName, ok := range map[string]bool{"localhost": true, "agent.elsewhere": false} {
		wl := serve(t, server.ServeConfig{Service: server.Workload, EtcdEndpoints: cli.Endpoints(), QuotaServer: d.addr,
			AgentServerName: serverName, TLS: server.ServerTLS{CertFile: files.Cert, KeyFile: files.Key, CAFile: files.CA}})
		c, err := sdk.Dial(t.Context(), sdk.Config{Server: "https://" + wl, CAFile: files.CA, Token: d.token})
		if err != nil {
			t.Fatal(err)
		}
		out, err := readLogs(c.WorkloadService)
		c.Close()
		if got := err == nil && strings.Contains(out, "output over TLS"); got != ok {
			t.Errorf("agents checked as %s: %q, %v; want the output: %v", serverName, out, err, ok)
		}
	}

	// The dev composition's workload service reaches agents in plaintext:
	// the TLS agent refuses the connection.
	if out, err := readLogs(d.workload); status.Code(err) != codes.Unavailable || strings.Contains(out, "output over TLS") {
		t.Errorf("logs relayed in plaintext from a TLS agent: %q, %v; want the connection refused (Unavailable)", out, err)
	}

	pool, err := grpcserver.LoadCAs(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	agentCall := func(transport credentials.TransportCredentials) error {
		conn, err := grpc.NewClient("passthrough:///"+agentAddr, grpc.WithTransportCredentials(transport),
			grpc.WithPerRPCCredentials(auth.Bearer(d.token)))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		st, err := nodemanagerv1.NewNodeAgentServiceClient(conn).ReadPodLogs(ctx, &nodemanagerv1.ReadPodLogsRequest{Workload: name})
		if err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	// Refused at the transport, before any token is looked at.
	if err := agentCall(insecure.NewCredentials()); status.Code(err) != codes.Unavailable {
		t.Errorf("a plaintext client to the TLS agent: %v, want the connection refused (Unavailable)", err)
	}
	if err := agentCall(credentials.NewTLS(&tls.Config{RootCAs: pool})); status.Code(err) != codes.Unavailable {
		t.Errorf("mutual TLS: a client without a certificate: %v, want the connection refused (Unavailable)", err)
	}
	// Past the transport, the agent serves the workload service alone: an
	// administrator's own token is genuine, and refused.
	if err := agentCall(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{clientCert}})); status.Code(err) != codes.PermissionDenied {
		t.Errorf("mutual TLS with the client certificate and a user's token: %v, want PermissionDenied (only the workload service is served)", err)
	}
}
