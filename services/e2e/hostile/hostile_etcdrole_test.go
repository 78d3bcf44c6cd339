package hostile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// Root on a node holds everything its agent holds: its etcd credential and
// its Runway token. With etcd's auth on and the agents' role (runway admin
// etcd-agent-role), the agent still runs its pods, opens their credentials
// and serves their output; and the thief, with the agent's etcd
// certificate, reads no signing key, user, session or sealed credential and
// writes no binding, and with the agent's token opens no other node's
// pods' credentials and calls nothing else.
func TestHostileAgentEtcdRoleAndToken(t *testing.T) {
	base := credsOpenDir(t)
	private := filepath.Join(base, "etcd-server")
	etcdTLS := filepath.Join(base, "etcd-client")
	for _, d := range []string{private, etcdTLS} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ca := newCredsCA(t)
	ca.issue(t, private, "etcd", 0o600)
	ca.issue(t, etcdTLS, "client", 0o600)    // the control plane: etcd's user "client", role root
	ca.issue(t, etcdTLS, "nodeagent", 0o600) // the agents: etcd's user "nodeagent", role runway-agent
	etcdURL, etcdProc := credsStartEtcdTLS(t, filepath.Join(base, "etcd-data"), private)
	etcdFlags := func(name string) []string {
		return []string{"--etcd-endpoints", etcdURL, "--etcd-ca-file", filepath.Join(etcdTLS, "ca.crt"),
			"--etcd-cert-file", filepath.Join(etcdTLS, name+".crt"), "--etcd-key-file", filepath.Join(etcdTLS, name+".key")}
	}
	admin := credsEtcdClient(t, etcdURL, etcdTLS)
	for _, user := range []string{"root", "client"} {
		if _, err := admin.UserAddWithOptions(t.Context(), user, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := admin.UserGrantRole(t.Context(), user, "root"); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command(credsRunway(t), append([]string{"admin", "etcd-agent-role", "--user", "nodeagent"}, etcdFlags("client")...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "granted to nodeagent") {
		t.Fatalf("runway admin etcd-agent-role: %v\n%s", err, out)
	}
	if _, err := admin.AuthEnable(t.Context()); err != nil {
		t.Fatal(err)
	}

	cp := credsStartControlPlane(t, etcdFlags("client"), etcdProc)
	minted, err := nodemanagerv1.NewNodeManagerServiceClient(cp.conns["nodemanager"]).CreateNodeAgentToken(t.Context(),
		&nodemanagerv1.CreateNodeAgentTokenRequest{Node: "nodes/node-1"})
	if err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(base, "agent-token")
	if err := os.WriteFile(tokenFile, []byte(minted.GetToken()), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(base, "agent-data")
	agent := credsStart(t, "runway agent", nil, nil, credsRunway(t), append([]string{"agent", "--runtime", "process",
		"--node", "node-1", "--gpus", "2", "--gpu-backend", "simulated", "--data-dir", dataDir, "--listen", "127.0.0.1:0",
		"--workload-server", cp.addrs["workload"], "--agent-token-file", tokenFile}, etcdFlags("nodeagent")...)...)
	procs := append(cp.procs, agent)

	// The agent at work on its role: a pod with a credential runs, and its
	// output comes back through the workload service.
	credsProject(t, cp.conns["quota"], "team-a", 2)
	const secret = "the project's api key 6f1c"
	if _, err := workloadv1.NewCredentialServiceClient(cp.conn).CreateCredential(t.Context(), &workloadv1.CreateCredentialRequest{
		Parent: "projects/team-a", CredentialId: "api", Credential: &workloadv1.Credential{
			Type: workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC, Values: map[string]string{"KEY": secret}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := workloadv1.NewWorkloadServiceClient(cp.conn).CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "uses-key", Workload: &workloadv1.Workload{
			Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "quickstart", Command: []string{"sh", "-c", `test "$API_KEY" = "` + secret + `" && echo matched`},
				Env: []*workloadv1.EnvVar{{Name: "API_KEY", Credential: &workloadv1.CredentialKeyRef{Credential: "api", Key: "KEY"}}},
				Gpu: &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	credsWaitCompleted(t, cp.conn, procs, "team-a", "uses-key", 3*time.Minute)
	if logs := credsLogs(t, cp.conn, "team-a", "uses-key"); !strings.Contains(logs, "matched") {
		t.Errorf("the pod's output through the workload service = %q, want matched", logs)
	}

	// The thief with the agent's etcd certificate.
	thief := credsEtcdClientAs(t, etcdURL, etcdTLS, "nodeagent")
	for _, key := range []string{etcdstore.PrefixSigningKeys, etcdstore.PrefixUsers, etcdstore.PrefixSessions,
		etcdstore.PrefixCredentials, etcdstore.PrefixAccessRules, etcdstore.PrefixAudit} {
		if _, err := thief.Get(t.Context(), key, clientv3.WithPrefix()); !errors.Is(err, rpctypes.ErrPermissionDenied) {
			t.Errorf("with the agent's etcd certificate, read %s: %v, want permission denied", key, err)
		}
	}
	if _, err := thief.Put(t.Context(), etcdstore.PrefixBindings+"node-1/team-a.stolen.0", "x"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("with the agent's etcd certificate, write a binding: %v, want permission denied", err)
	}
	if r, err := thief.Get(t.Context(), etcdstore.PrefixVerifyingKeys, clientv3.WithPrefix()); err != nil || len(r.Kvs) == 0 {
		t.Errorf("the agent's role reads no verifying key: %v", err)
	}

	// The thief with the agent's token.
	stolen := credsDial(t, cp.addrs["workload"], minted.GetToken())
	if _, err := workloadv1.NewCredentialServiceClient(stolen).ResolvePodCredentials(t.Context(), &workloadv1.ResolvePodCredentialsRequest{
		Node: "nodes/node-2", Workload: "projects/team-a/workloads/uses-key"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("node-1's token opens credentials as node-2: %v, want PermissionDenied", err)
	}
	quota := quotav1.NewQuotaServiceClient(credsDial(t, cp.addrs["quota"], minted.GetToken()))
	if r, err := quota.ListProjects(t.Context(), &quotav1.ListProjectsRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the agent's token lists projects: %v, %v; want PermissionDenied", r.GetProjects(), err)
	}
	if _, err := quota.GetProject(t.Context(), &quotav1.GetProjectRequest{Name: "projects/team-a"}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the agent's token reads team-a: %v, want PermissionDenied", err)
	}
	if _, err := workloadv1.NewWorkloadServiceClient(stolen).CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "by-thief", Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "quickstart"}}}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("the agent's token submits: %v, want PermissionDenied", err)
	}
}
