//go:build linux

package hostile

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/apierr"
)

// A researcher of team-b goes after team-a's credentials and its
// department's: it can neither read them (by name or by listing), nor name
// them in its own workloads (by full name, by id, as a whole or one key),
// nor open any credential's values itself (only a node's agent may, and
// the administrator may not either). Every answer it gets is searched for
// the value. team-a's own researcher sees the keys, never the value.
func TestHostileCredentialOfAnotherProject(t *testing.T) {
	d := apiStartDev(t, nil)
	secret := "value-team-a-7e41c0d9b2"
	admin := workloadv1.NewCredentialServiceClient(d.admin)
	for _, c := range []struct{ parent, id string }{{"projects/team-a", "wandb"}, {"departments/dept-a", "shared"}} {
		if _, err := admin.CreateCredential(t.Context(), &workloadv1.CreateCredentialRequest{Parent: c.parent, CredentialId: c.id,
			Credential: &workloadv1.Credential{Type: workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC,
				Values: map[string]string{"WANDB_API_KEY": secret}}}); err != nil {
			t.Fatalf("CreateCredential(%s/%s): %v", c.parent, c.id, err)
		}
	}
	bob := d.conn(t, d.member(t, "bob", "roles/l1-researcher", apiScope(identityv1.ScopeKind_SCOPE_KIND_PROJECT, "projects/team-b")))
	alice := d.conn(t, d.member(t, "alice", "roles/l1-researcher", apiScope(identityv1.ScopeKind_SCOPE_KIND_PROJECT, "projects/team-a")))
	var answers []string
	keep := func(resp any, err error) error {
		answers = append(answers, fmt.Sprint(resp), fmt.Sprint(err))
		return err
	}

	creds := workloadv1.NewCredentialServiceClient(bob)
	for _, name := range []string{"projects/team-a/credentials/wandb", "departments/dept-a/credentials/shared"} {
		err := keep(creds.GetCredential(t.Context(), &workloadv1.GetCredentialRequest{Name: name}))
		apiWant(t, "bob reads "+name, err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	}
	for _, parent := range []string{"projects/team-a", "departments/dept-a"} {
		err := keep(creds.ListCredentials(t.Context(), &workloadv1.ListCredentialsRequest{Parent: parent}))
		apiWant(t, "bob lists "+parent, err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	}

	// Named in bob's own workloads in team-b.
	wl := workloadv1.NewWorkloadServiceClient(bob)
	submit := func(spec *workloadv1.WorkloadSpec) error {
		spec.Image, spec.Command = "img", []string{"env"}
		return keep(wl.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-b", WorkloadId: "steal",
			Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: spec}}))
	}
	for _, tc := range []struct {
		what  string
		spec  *workloadv1.WorkloadSpec
		field string
	}{
		{"team-a's by full name", &workloadv1.WorkloadSpec{Credentials: []*workloadv1.CredentialMount{{Credential: "projects/team-a/credentials/wandb"}}},
			"workload.spec.credentials[0].credential"},
		{"dept-a's as files", &workloadv1.WorkloadSpec{Credentials: []*workloadv1.CredentialMount{{Credential: "departments/dept-a/credentials/shared", Path: "/mnt"}}},
			"workload.spec.credentials[0].credential"},
		{"team-a's key in a variable", &workloadv1.WorkloadSpec{Env: []*workloadv1.EnvVar{{Name: "K",
			Credential: &workloadv1.CredentialKeyRef{Credential: "projects/team-a/credentials/wandb", Key: "WANDB_API_KEY"}}}},
			"workload.spec.env[0].credential.credential"},
	} {
		err := submit(tc.spec)
		apiWant(t, "bob submits "+tc.what, err, codes.InvalidArgument, commonv1.ErrorReason_INVALID_FIELD)
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("bob submits %s: %v, want the field %s", tc.what, err, tc.field)
		}
	}
	// By id, team-b, dept-b and the account are searched: none has it.
	err := submit(&workloadv1.WorkloadSpec{Credentials: []*workloadv1.CredentialMount{{Credential: "wandb"}}})
	apiWant(t, "bob submits wandb by id", err, codes.NotFound, commonv1.ErrorReason_CREDENTIAL_NOT_FOUND)

	// Opening values is a node agent's call, for a pod bound to its node:
	// neither bob nor the administrator may make it.
	if _, err := workloadv1.NewWorkloadServiceClient(d.admin).CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "uses", Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "img", Command: []string{"true"},
				Credentials: []*workloadv1.CredentialMount{{Credential: "wandb"}}}}}); err != nil {
		t.Fatalf("the administrator submits team-a's workload: %v", err)
	}
	for who, c := range map[string]workloadv1.CredentialServiceClient{"bob": creds, "the administrator": admin} {
		err := keep(c.ResolvePodCredentials(t.Context(), &workloadv1.ResolvePodCredentialsRequest{Node: "nodes/node-1",
			Workload: "projects/team-a/workloads/uses"}))
		apiWant(t, who+" opens team-a's pod credentials", err, codes.PermissionDenied, commonv1.ErrorReason_PERMISSION_DENIED)
	}

	// Where it may use them: keys, never the value.
	own, err := workloadv1.NewCredentialServiceClient(alice).GetCredential(t.Context(), &workloadv1.GetCredentialRequest{Name: "projects/team-a/credentials/wandb"})
	_ = keep(own, err)
	if err != nil || strings.Join(own.GetKeys(), ",") != "WANDB_API_KEY" || len(own.GetValues()) != 0 {
		t.Errorf("alice reads team-a's credential: %v, %v", own, err)
	}
	if reason := apierr.Reason(keep(workloadv1.NewCredentialServiceClient(alice).ListCredentials(t.Context(),
		&workloadv1.ListCredentialsRequest{Parent: "departments/dept-a"}))); reason != "" {
		t.Errorf("alice lists her department's credentials: %s", reason)
	}
	for _, a := range answers {
		if strings.Contains(a, secret) {
			t.Errorf("an answer holds the value: %.200s", a)
		}
	}
}

// While a pod of team-a holds a credential as variables and as files (the
// process runtime: a tmpfs in its own mount namespace), a pod of team-b on
// the same node hunts for the value in every process's environment and
// command line, through every process's root at the files' path, and in
// every file changed since the test began, and finds nothing. The same
// search run as root on the node finds it: the value was there to find.
func TestHostileCredentialPodOfAnotherProject(t *testing.T) {
	credsSince(t)
	if os.Geteuid() != 0 {
		t.Fatal("this test runs as root (make test does): runway dev gives pods their own uids and mount namespaces only as root")
	}
	d := credsStartDev(t, nil, nil, "--runtime", "process")
	credsProject(t, d.conn, "team-a", 2)
	credsProject(t, d.conn, "team-b", 2)
	secret := []byte("held-by-team-a-3f9e0c7a51d2")
	if _, err := workloadv1.NewCredentialServiceClient(d.conn).CreateCredential(t.Context(), &workloadv1.CreateCredentialRequest{
		Parent: "projects/team-a", CredentialId: "wandb", Credential: &workloadv1.Credential{
			Type: workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC, Values: map[string]string{"WANDB_API_KEY": string(secret)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := workloadv1.NewWorkloadServiceClient(d.conn).CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{
		Parent: "projects/team-a", WorkloadId: "holder", Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
			Spec: &workloadv1.WorkloadSpec{Image: "quickstart", Command: []string{"sleep", "600"},
				Credentials: []*workloadv1.CredentialMount{{Credential: "wandb"}, {Credential: "wandb", Path: "/mnt"}}}}}); err != nil {
		t.Fatal(err)
	}
	credsEventually(t, time.Minute, "holder running", []*credsProc{d.proc}, func() string {
		if p, why := credsPhase(t, d.conn, "team-a", "holder"); p != workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING {
			return p.String() + why
		}
		return ""
	})
	args := credsSearchArgs(t, credsSearcher(t), []credsSecret{{"wandb", secret}}, "/mnt/WANDB_API_KEY")
	control := exec.Command(args[0], args[1:]...)
	control.Dir = "/"
	out, err := control.Output()
	if err != nil {
		t.Fatalf("control search: %v\n%s", err, out)
	}
	if f := credsParse(string(out)); !strings.Contains(strings.Join(f.found, "\n"), "FOUND wandb") {
		t.Fatalf("control search as root: want the holder's value found, got %v", f.found)
	}
	if err := credsSubmit(d.conn, t.Context(), "team-b", "thief", "", args...); err != nil {
		t.Fatal(err)
	}
	credsWaitCompleted(t, d.conn, []*credsProc{d.proc}, "team-b", "thief", 3*time.Minute)
	f := credsPodSearch(t, credsLogs(t, d.conn, "team-b", "thief"), 1000)
	if len(f.found) > 0 || len(f.opened) > 0 {
		t.Errorf("team-b's pod reached team-a's credential:\n%s\n%s", strings.Join(f.found, "\n"), strings.Join(f.opened, "\n"))
	}
}
