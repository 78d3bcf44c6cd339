//go:build linux

package hostile

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// A team-b pod reads every command line in its /proc while a team-a pod
// runs with a marker in its own: with the process runtime as root it sees
// only its own processes (a private /proc with hidepid), neither team-a's
// nor runway dev's, though the marker process is there on the host.
func TestHostileProcessPodSeesNoOtherTenantsCommandLine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (make test does): runway dev gives pods their own uids only as root")
	}
	d := credsStartDev(t, nil, nil, "--runtime", "process")
	if !strings.Contains(d.proc.out.String(), "a mount namespace") {
		t.Errorf("runway dev's start line does not say the pods' isolation:\n%s", d.proc.out.String())
	}
	credsProject(t, d.conn, "team-a", 1)
	credsProject(t, d.conn, "team-b", 1)
	const marker = "team-a-private-hyperparameters-7f3c"
	if err := credsSubmit(d.conn, t.Context(), "team-a", "victim", "", "sh", "-c", "sleep 600; : "+marker); err != nil {
		t.Fatal(err)
	}
	victim := 0
	credsEventually(t, 60*time.Second, "team-a's pod on the host", []*credsProc{d.proc}, func() string {
		victim = credsHostPid(marker)
		if victim == 0 {
			return "no process with the marker yet"
		}
		return ""
	})
	if err := credsSubmit(d.conn, t.Context(), "team-b", "snoop", "", "sh", "-c",
		`for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done; ls -d /proc/`+strconv.Itoa(victim)+` 2>&1; echo snoop-done`); err != nil {
		t.Fatal(err)
	}
	credsWaitCompleted(t, d.conn, []*credsProc{d.proc}, "team-b", "snoop", 90*time.Second)
	out := credsLogs(t, d.conn, "team-b", "snoop")
	if !strings.Contains(out, "snoop-done") || !strings.Contains(out, "tr ") && !strings.Contains(out, "sh -c") {
		t.Fatalf("the snooping pod did not read its own command lines (its /proc must show itself):\n%s", out)
	}
	for _, leak := range []string{marker, "--data-dir", "sleep 600"} {
		if strings.Contains(out, leak) {
			t.Errorf("team-b's pod read %q from another process's command line:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "No such file or directory") {
		t.Errorf("team-b's pod reached /proc/%d (team-a's pod), want No such file or directory:\n%s", victim, out)
	}
	if credsHostPid(marker) != victim {
		t.Fatal("team-a's pod ended during the snoop: the check proves nothing")
	}
}

// credsHostPid is the pid of a process whose command line holds marker
// (as root sees the host's /proc), or 0.
func credsHostPid(marker string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(b), marker) && !strings.Contains(string(b), "runway") {
			return pid
		}
	}
	return 0
}

// runway dev without root and with the process runtime runs every pod as
// the developer's own user, which reads DATA-DIR/env (the administrator's
// token): it says so in its start line, runs the administrator's
// workloads, and refuses another user's with PERMISSION_DENIED naming
// --runtime container and root, so that no second user's code ever runs
// with the administrator's token in reach.
func TestHostileProcessDevWithoutRootRunsOneUsersPods(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (make test does): it starts runway dev as the unprivileged user nobody")
	}
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}
	d := credsStartDev(t, nobody, []string{"HOME=/nonexistent"}, "--runtime", "process")
	startLine := d.proc.out.String()
	for _, want := range []string{"every pod runs as nobody (not root): no isolation", "--runtime container"} {
		if !strings.Contains(startLine, want) {
			t.Errorf("runway dev's start line does not say %q:\n%s", want, startLine)
		}
	}
	credsProject(t, d.conn, "team-a", 2)

	// The administrator's own workload runs: the gate is on users, not on
	// workloads.
	if err := credsSubmit(d.conn, t.Context(), "team-a", "mine", "", "sh", "-c", "id -u"); err != nil {
		t.Fatalf("the administrator's workload: %v", err)
	}
	credsWaitCompleted(t, d.conn, []*credsProc{d.proc}, "team-a", "mine", 90*time.Second)
	if out := credsLogs(t, d.conn, "team-a", "mine"); strings.TrimSpace(out) != "65534" {
		t.Errorf("the administrator's pod ran as %q, want runway dev's own uid 65534", out)
	}

	ids := identityv1.NewIdentityServiceClient(d.conn)
	if _, err := ids.CreateUser(t.Context(), &identityv1.CreateUserRequest{UserId: "bob",
		User: &identityv1.User{Email: "bob@example.com", Password: "first password of bob"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ids.CreateAccessRule(t.Context(), &identityv1.CreateAccessRuleRequest{AccessRule: &identityv1.AccessRule{
		Subject: &identityv1.Subject{Kind: identityv1.SubjectKind_SUBJECT_KIND_USER, Name: "users/bob"},
		Role:    "roles/l1-researcher", Scope: &identityv1.Scope{Kind: identityv1.ScopeKind_SCOPE_KIND_PROJECT, Name: "projects/team-a"}}}); err != nil {
		t.Fatal(err)
	}
	r, err := ids.Login(t.Context(), &identityv1.LoginRequest{Credentials: &identityv1.LoginRequest_Password{
		Password: &identityv1.PasswordCredentials{User: "bob", Password: "first password of bob", NewPassword: "bob's own password"}}})
	if err != nil {
		t.Fatal(err)
	}
	bob := credsDial(t, d.addr, r.GetAccessToken())
	// Bob's rule reaches the guard's cache shortly: until then the refusal
	// would be the access rule's, so wait for his read to pass first.
	credsEventually(t, 20*time.Second, "bob's access rule", []*credsProc{d.proc}, func() string {
		if _, err := workloadv1.NewWorkloadServiceClient(bob).ListWorkloads(t.Context(),
			&workloadv1.ListWorkloadsRequest{Parent: "projects/team-a"}); err != nil {
			return err.Error()
		}
		return ""
	})
	err = credsSubmit(bob, t.Context(), "team-a", "steal", "", "sh", "-c", "cat "+filepath.Join(d.dataDir, "env"))
	st, _ := status.FromError(err)
	if st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "--runtime container") ||
		!strings.Contains(st.Message(), "root") || !strings.Contains(st.Message(), "users/bob") || strings.Contains(st.Message(), "\n") {
		t.Fatalf("bob's workload: %v, want one line of PERMISSION_DENIED naming users/bob, root and --runtime container", err)
	}
	_, err = workloadv1.NewWorkloadServiceClient(d.conn).GetWorkload(t.Context(),
		&workloadv1.GetWorkloadRequest{Name: "projects/team-a/workloads/steal"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("bob's refused workload: GetWorkload = %v, want NotFound (it must not exist)", err)
	}
	t.Logf("refusal: %s", st.Message())
}
