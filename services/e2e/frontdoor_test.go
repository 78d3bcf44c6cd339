//go:build linux

package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// TestFrontDoor: every service is its own `runway serve` process and
// `runway gateway` is the one address in front of them. The CLI, given only
// the gateway as its server, runs commands each owned by a different
// service (sign-in: identity; project create: quota; submit and list:
// workload; node list: nodemanager), and `project list` fills allocation
// and fair share from the scheduler. REST reaches the services through the
// same address, and the services still authenticate every call.
func TestFrontDoor(t *testing.T) {
	tmp := t.TempDir()
	etcdAddr, etcdProc := startEtcd(t, filepath.Join(tmp, "etcd"))
	all := []*proc{etcdProc}
	serve := func(svc string, args ...string) string {
		addr := freeAddr(t)
		p := start(t, svc, runwayBin, append([]string{"serve", svc, "--etcd-endpoints", etcdAddr, "--listen", addr}, args...)...)
		serving(t, p, dial(t, addr))
		all = append(all, p)
		return addr
	}
	identityAddr := serve("identity")
	password := oneTimePassword(t, all[len(all)-1])
	quotaAddr := serve("quota")
	keyFile := filepath.Join(tmp, "credentials.keys")
	if out, err := exec.Command(runwayBin, "admin", "credentials", "add-key", "--key-file", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("runway admin credentials add-key: %v\n%s", err, out)
	}
	workloadAddr := serve("workload", "--quota-server", quotaAddr, "--credentials-key-file", keyFile)
	schedulerAddr := serve("scheduler", "--replica", "sched-1")
	nodemanagerAddr := serve("nodemanager")
	gatewayAddr := freeAddr(t)
	gw := start(t, "gateway", runwayBin, "gateway", "--listen", gatewayAddr,
		"--identity-server", identityAddr, "--quota-server", quotaAddr, "--workload-server", workloadAddr,
		"--scheduler-server", schedulerAddr, "--nodemanager-server", nodemanagerAddr)
	gwConn := dial(t, gatewayAddr)
	serving(t, gw, gwConn)
	all = append(all, gw)

	// Without a token the call passes the gateway and the quota service
	// refuses it.
	_, err := quotav1.NewQuotaServiceClient(gwConn).ListProjects(t.Context(), &quotav1.ListProjectsRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("ListProjects without a token through the gateway: %v, want Unauthenticated", err)
	}
	login, err := identityv1.NewIdentityServiceClient(gwConn).Login(t.Context(), &identityv1.LoginRequest{
		Credentials: &identityv1.LoginRequest_Password{Password: &identityv1.PasswordCredentials{
			User: "admin", Password: password, NewPassword: "the administrator's own password"}}})
	if err != nil {
		t.Fatalf("Login through the gateway: %v", err)
	}
	token = login.GetAccessToken()
	t.Cleanup(func() { token = "" })

	cli := func(args ...string) (string, error) {
		cmd := exec.Command(runwayBin, args...)
		cmd.Env = append(os.Environ(), sdk.EnvServer+"="+gatewayAddr, sdk.EnvToken+"="+token,
			sdk.EnvConfig+"="+filepath.Join(tmp, "config.json"))
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			return out.String(), errors.New(errOut.String())
		}
		return out.String(), nil
	}
	ok := func(args ...string) string {
		t.Helper()
		out, err := cli(args...)
		if err != nil {
			t.Fatalf("runway %s through the gateway: %v", strings.Join(args, " "), err)
		}
		return out
	}
	until := func(want string, args ...string) {
		t.Helper()
		var got string
		eventually(t, 30*time.Second, "runway "+strings.Join(args, " "), all, func() string {
			if got = ok(args...); got != want {
				return "printed\n" + got + "want\n" + want
			}
			return ""
		})
	}
	if out := ok("whoami"); !strings.Contains(out, "users/admin") {
		t.Errorf("whoami through the gateway printed %q", out)
	}
	// The agent signs nothing: it opens its pods' credentials with its
	// node's token, which the administrator mints for it.
	agentToken := filepath.Join(tmp, "agent-token")
	if err := os.WriteFile(agentToken, []byte(ok("admin", "node-token", "node-1", "--ttl", "1h")), 0o600); err != nil {
		t.Fatal(err)
	}
	agentDir := filepath.Join(tmp, "agent")
	all = append(all, start(t, "agent node-1", runwayBin, "agent", "--node", "node-1", "--gpus", "2",
		"--etcd-endpoints", etcdAddr, "--data-dir", agentDir, "--workload-server", workloadAddr, "--agent-token-file", agentToken))
	t.Cleanup(func() { _ = leftovers(agentDir) })
	ok("project", "create", "team-a", "--gpu", "2")
	ok("training", "submit", "a1", "-p", "team-a", "-i", "busybox", "-g", "1", "--", "sleep", "300")
	until(`Workload  Type      Status   Project  Running/Req.Pods  GPU Alloc.
a1        Training  Running  team-a   1/1               1.00
`, "workload", "list", "-A")
	// Allocation and fair share come from the scheduler's queues: a list
	// served by the quota service alone shows "-" for them.
	until(`Project  Department  Node Pool  GPU Quota  Limit      Weight  Allocated  Fair Share
team-a   default     default    2.00       unlimited  1       1.00       1.00
`, "project", "list")
	if out := ok("node", "list"); !strings.Contains(out, "node-1") {
		t.Errorf("node list through the gateway printed %q, want node-1", out)
	}

	// A credential through the gateway reaches the agent's pod, which the
	// agent opens from the workload service as its node.
	secret := "frontdoor-secret-8d2a61"
	credCmd := exec.Command(runwayBin, "credential", "create", "generic", "api", "-p", "team-a", "--from-env-file", "-")
	credCmd.Env = append(os.Environ(), sdk.EnvServer+"="+gatewayAddr, sdk.EnvToken+"="+token, sdk.EnvConfig+"="+filepath.Join(tmp, "config.json"))
	credCmd.Stdin = strings.NewReader("API_KEY=" + secret + "\n")
	if out, err := credCmd.CombinedOutput(); err != nil {
		t.Fatalf("runway credential create through the gateway: %v\n%s", err, out)
	}
	ok("training", "submit", "c1", "-p", "team-a", "-i", "busybox", "--credential", "api", "--", "sh", "-c", `test "$API_KEY" = "`+secret[:9]+`$(echo -secret-8d2a61)" && echo matched`)
	eventually(t, 30*time.Second, "c1's output", all, func() string {
		if out, _ := cli("workload", "logs", "c1", "-p", "team-a"); out != "matched\n" {
			return "printed " + out
		}
		return ""
	})

	// REST: the quota service's path and the workload service's, at one
	// address, with the caller's token.
	for path, want := range map[string]string{"/v1/projects": `"projects/team-a"`,
		"/v1/projects/team-a/workloads": `"projects/team-a/workloads/a1"`} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+gatewayAddr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s through the gateway: %d %s, want 200 with %s", path, resp.StatusCode, body, want)
		}
	}
	// The web UI is served there too.
	resp, err := http.Get("http://" + gatewayAddr + "/projects")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET /projects through the gateway: Content-Type %q, want the web UI's HTML", ct)
	}
}
