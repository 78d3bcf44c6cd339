package workload_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

func generic(values map[string]string) *workloadv1.Credential {
	return &workloadv1.Credential{Type: workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC, Values: values}
}

// Bad credentials are refused with every field at fault; a good one comes
// back with its keys, and neither its response, Get, List nor its etcd
// value holds a value in plain text.
func TestCredentials_CreateChecksAndHidesValues(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research"})
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		req    *workloadv1.CreateCredentialRequest
		fields []string
	}{
		{"nothing", &workloadv1.CreateCredentialRequest{}, []string{"credential_id", "credential"}},
		{"bad parent", &workloadv1.CreateCredentialRequest{Parent: "teams/a", CredentialId: "c", Credential: generic(map[string]string{"K": "v"})}, []string{"parent"}},
		{"no type", &workloadv1.CreateCredentialRequest{CredentialId: "c", Credential: &workloadv1.Credential{}}, []string{"credential.type"}},
		{"generic without values", &workloadv1.CreateCredentialRequest{CredentialId: "c", Credential: generic(nil)}, []string{"credential.values"}},
		{"generic bad key", &workloadv1.CreateCredentialRequest{CredentialId: "c", Credential: generic(map[string]string{"1BAD": "v"})}, []string{"credential.values[1BAD]"}},
		{"registry", &workloadv1.CreateCredentialRequest{CredentialId: "c", Credential: &workloadv1.Credential{
			Type: workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY, Values: map[string]string{"username": "u"}}},
			[]string{"credential.server", "credential.values[password]"}},
		{"s3 unknown key", &workloadv1.CreateCredentialRequest{CredentialId: "c", Credential: &workloadv1.Credential{
			Type: workloadv1.CredentialType_CREDENTIAL_TYPE_S3_KEYS, Values: map[string]string{"access_key_id": "a", "secret_access_key": "s", "region": "x"}}},
			[]string{"credential.values[region]"}},
		{"git both", &workloadv1.CreateCredentialRequest{CredentialId: "c", Credential: &workloadv1.Credential{
			Type: workloadv1.CredentialType_CREDENTIAL_TYPE_GIT, Values: map[string]string{"token": "t", "ssh_private_key": "k"}}},
			[]string{"credential.values"}},
		{"oversized", &workloadv1.CreateCredentialRequest{CredentialId: "c", Credential: generic(map[string]string{"K": strings.Repeat("x", 65<<10)})},
			[]string{"credential.values[K]"}},
	} {
		_, err := e.creds.CreateCredential(ctx, tc.req)
		wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
		for _, f := range tc.fields {
			if _, ok := violations(err)[f]; !ok {
				t.Errorf("%s: violations %v, want %s", tc.name, violations(err), f)
			}
		}
	}
	_, err := e.creds.CreateCredential(ctx, &workloadv1.CreateCredentialRequest{Parent: "projects/nope", CredentialId: "c", Credential: generic(map[string]string{"K": "v"})})
	wantError(t, err, codes.NotFound, "PROJECT_NOT_FOUND")

	secret := "plain-secret-5a0c3e"
	got, err := e.creds.CreateCredential(ctx, &workloadv1.CreateCredentialRequest{Parent: "projects/team-a", CredentialId: "c",
		Credential: generic(map[string]string{"B": secret, "A": secret + "2"})})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetName() != "projects/team-a/credentials/c" || strings.Join(got.GetKeys(), ",") != "A,B" || got.GetEtag() == "" {
		t.Errorf("created %v", got)
	}
	_, err = e.creds.CreateCredential(ctx, &workloadv1.CreateCredentialRequest{Parent: "projects/team-a", CredentialId: "c", Credential: generic(map[string]string{"K": "v"})})
	wantError(t, err, codes.AlreadyExists, "CREDENTIAL_ALREADY_EXISTS")
	one, err := e.creds.GetCredential(ctx, &workloadv1.GetCredentialRequest{Name: got.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	list, err := e.creds.ListCredentials(ctx, &workloadv1.ListCredentialsRequest{Parent: "projects/team-a"})
	if err != nil || len(list.GetCredentials()) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	raw, err := e.etcd.Client.Get(ctx, etcdstore.PrefixCredentials, clientv3.WithPrefix())
	if err != nil || len(raw.Kvs) != 1 {
		t.Fatalf("etcd: %v, %v", raw, err)
	}
	for what, s := range map[string]string{"create": fmt.Sprint(got), "get": fmt.Sprint(one), "list": fmt.Sprint(list), "etcd": string(raw.Kvs[0].Value)} {
		if strings.Contains(s, secret) {
			t.Errorf("%s holds the value: %s", what, s)
		}
	}
	_, err = e.creds.GetCredential(ctx, &workloadv1.GetCredentialRequest{Name: "projects/team-a/credentials/nope"})
	wantError(t, err, codes.NotFound, "CREDENTIAL_NOT_FOUND")
	_, err = e.creds.GetCredential(ctx, &workloadv1.GetCredentialRequest{Name: "projects/team-a/environments/c"})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
}

// ResolvePodCredentials answers for a pod bound to the node it names only;
// a workload whose project moved to another department loses that
// department's credential.
func TestCredentials_ResolveOnlyForTheBoundNode(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research", "team-b": "ops"})
	ctx := t.Context()
	if _, err := e.creds.CreateCredential(ctx, &workloadv1.CreateCredentialRequest{Parent: "departments/research", CredentialId: "wandb",
		Credential: generic(map[string]string{"WANDB_API_KEY": "v1", "OTHER": "v2"})}); err != nil {
		t.Fatal(err)
	}
	w := training()
	w.Spec.Credentials = []*workloadv1.CredentialMount{{Credential: "wandb"}, {Credential: "wandb", Path: "/secrets"}}
	w.Spec.Env = []*workloadv1.EnvVar{{Name: "TOKEN", Credential: &workloadv1.CredentialKeyRef{Credential: "wandb", Key: "OTHER"}}}
	stored := e.create(t, "team-a", "uses", w)
	if c := stored.GetSpec().GetCredentials()[0].GetCredential(); c != "departments/research/credentials/wandb" {
		t.Errorf("stored credential %q, want the full name", c)
	}
	if _, err := e.etcd.Client.Put(ctx, etcdstore.PrefixBindings+"node-1/team-a.uses.0", "x"); err != nil {
		t.Fatal(err)
	}
	req := func(node string, pod int32) *workloadv1.ResolvePodCredentialsRequest {
		return &workloadv1.ResolvePodCredentialsRequest{Node: node, Workload: "projects/team-a/workloads/uses", PodIndex: pod}
	}
	for _, r := range []*workloadv1.ResolvePodCredentialsRequest{req("nodes/node-2", 0), req("nodes/node-1", 1)} {
		resp, err := e.creds.ResolvePodCredentials(ctx, r)
		wantError(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
		if resp != nil {
			t.Errorf("%v answered %v", r, resp)
		}
	}
	_, err := e.creds.ResolvePodCredentials(ctx, &workloadv1.ResolvePodCredentialsRequest{Node: "node-1", Workload: "uses", PodIndex: -1})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	for _, f := range []string{"node", "workload", "pod_index"} {
		if _, ok := violations(err)[f]; !ok {
			t.Errorf("violations %v, want %s", violations(err), f)
		}
	}
	resp, err := e.creds.ResolvePodCredentials(ctx, req("nodes/node-1", 0))
	if err != nil {
		t.Fatal(err)
	}
	// Compared as values: the protobuf text form is deliberately unstable.
	got := map[string]string{}
	for _, e := range resp.GetEnv() {
		got["env "+e.GetName()] = e.GetValue()
	}
	for _, f := range resp.GetFiles() {
		got["file "+f.GetPath()] = string(f.GetContent())
	}
	want := map[string]string{"env OTHER": "v2", "env WANDB_API_KEY": "v1", "env TOKEN": "v2",
		"file /secrets/WANDB_API_KEY": "v1", "file /secrets/OTHER": "v2"}
	if !maps.Equal(got, want) {
		t.Errorf("resolved %v, want %v", got, want)
	}

	// team-a moves to ops: research's credential is no longer its to use.
	it, err := e.projects.Get(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.projects.Update(ctx, "team-a", &quotav1.Project{Name: "projects/team-a", Department: "departments/ops"}, it.Etag); err != nil {
		t.Fatal(err)
	}
	_, err = e.creds.ResolvePodCredentials(ctx, req("nodes/node-1", 0))
	wantError(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
}
