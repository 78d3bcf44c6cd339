package workload_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// An environment's pull policy and registry credential reach the workloads
// submitted from it (a submission's own win); the credential is stored by
// its full name, must be a registry credential of the image's own registry
// and of a scope the project may use; the pod's node gets its server, user
// name and password, and nothing else does.
func TestCredentials_RegistryCredential(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research", "team-b": "ops"})
	ctx := t.Context()
	reg := func(server string) *workloadv1.Credential {
		return &workloadv1.Credential{Type: workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY, Server: server,
			Values: map[string]string{"username": "alice", "password": "pw-7e1f"}}
	}
	for _, c := range []*workloadv1.CreateCredentialRequest{
		{Parent: "departments/research", CredentialId: "reg", Credential: reg("Registry.Example.com:5000")},
		{Parent: "departments/research", CredentialId: "hub", Credential: reg("index.docker.io")},
		{Parent: "departments/ops", CredentialId: "ops", Credential: reg("registry.example.com:5000")},
		{Parent: "projects/team-a", CredentialId: "gen", Credential: generic(map[string]string{"K": "v"})},
	} {
		if _, err := e.creds.CreateCredential(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	image := "registry.example.com:5000/team/train:1"
	if _, err := e.gov.CreateEnvironment(ctx, &workloadv1.CreateEnvironmentRequest{Parent: "departments/research", EnvironmentId: "private",
		Environment: &workloadv1.Environment{Image: image, ImagePullPolicy: workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_ALWAYS, RegistryCredential: "reg"}}); err != nil {
		t.Fatal(err)
	}
	submit := func(id, env string, spec *workloadv1.WorkloadSpec) (*workloadv1.Workload, error) {
		return e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: id, Environment: env,
			Workload: &workloadv1.Workload{Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, Spec: spec}})
	}
	got, err := submit("from-env", "private", &workloadv1.WorkloadSpec{Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.GetSpec(); s.GetRegistryCredential() != "departments/research/credentials/reg" || s.GetImagePullPolicy() != workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_ALWAYS {
		t.Errorf("from the environment: credential %q, policy %v", s.GetRegistryCredential(), s.GetImagePullPolicy())
	}
	got, err = submit("own", "private", &workloadv1.WorkloadSpec{Command: []string{"true"}, ImagePullPolicy: workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_NEVER})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.GetSpec().GetImagePullPolicy(); p != workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_NEVER {
		t.Errorf("the submission's own policy: %v", p)
	}
	if _, err := submit("hub", "", &workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"true"}, RegistryCredential: "hub"}); err != nil {
		t.Errorf("a Docker Hub credential for a Docker Hub image: %v", err)
	}

	for _, tc := range []struct {
		name   string
		spec   *workloadv1.WorkloadSpec
		code   codes.Code
		reason string
		field  string
	}{
		{"another registry", &workloadv1.WorkloadSpec{Image: "evil.example.org/x:1", RegistryCredential: "reg"}, codes.InvalidArgument, "INVALID_FIELD", "workload.spec.registry_credential"},
		{"docker hub", &workloadv1.WorkloadSpec{Image: "busybox", RegistryCredential: "reg"}, codes.InvalidArgument, "INVALID_FIELD", "workload.spec.registry_credential"},
		{"generic", &workloadv1.WorkloadSpec{Image: image, RegistryCredential: "gen"}, codes.InvalidArgument, "INVALID_FIELD", "workload.spec.registry_credential"},
		{"unknown policy", &workloadv1.WorkloadSpec{Image: image, ImagePullPolicy: 9}, codes.InvalidArgument, "INVALID_FIELD", "workload.spec.image_pull_policy"},
		{"another department's", &workloadv1.WorkloadSpec{Image: image, RegistryCredential: "departments/ops/credentials/ops"}, codes.InvalidArgument, "INVALID_FIELD", "workload.spec.registry_credential"},
		{"missing", &workloadv1.WorkloadSpec{Image: image, RegistryCredential: "nope"}, codes.NotFound, "CREDENTIAL_NOT_FOUND", ""},
	} {
		tc.spec.Command = []string{"true"}
		_, err := submit("bad", "", tc.spec)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if got := status.Code(err); got != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
		if tc.reason != "" {
			wantError(t, err, tc.code, tc.reason)
		}
		if tc.field != "" {
			if _, ok := violations(err)[tc.field]; !ok {
				t.Errorf("%s: violations %v, want %s", tc.name, violations(err), tc.field)
			}
		}
	}

	// Only the pod's node opens it.
	if _, err := e.etcd.Client.Put(ctx, etcdstore.PrefixBindings+"node-1/team-a.from-env.0", "x"); err != nil {
		t.Fatal(err)
	}
	req := &workloadv1.ResolvePodCredentialsRequest{Node: "nodes/node-1", Workload: "projects/team-a/workloads/from-env"}
	resp, err := e.creds.ResolvePodCredentials(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if a := resp.GetRegistry(); a.GetServer() != "Registry.Example.com:5000" || a.GetUsername() != "alice" || a.GetPassword() != "pw-7e1f" ||
		len(resp.GetEnv())+len(resp.GetFiles()) != 0 {
		t.Errorf("resolved %v", resp)
	}
	req.Node = "nodes/node-2"
	_, err = e.creds.ResolvePodCredentials(ctx, req)
	wantError(t, err, codes.PermissionDenied, "PERMISSION_DENIED")
}

// A policy's default registry credential is resolved and checked as a
// submitter's: stored by its full name, refused for an image of another
// registry.
func TestCredentials_RegistryCredentialFromAPolicy(t *testing.T) {
	e := start(t)
	e.addOrg(t, map[string]string{"team-a": "research"})
	ctx := t.Context()
	if _, err := e.creds.CreateCredential(ctx, &workloadv1.CreateCredentialRequest{Parent: "departments/research", CredentialId: "reg",
		Credential: &workloadv1.Credential{Type: workloadv1.CredentialType_CREDENTIAL_TYPE_REGISTRY, Server: "registry.example.com",
			Values: map[string]string{"username": "u", "password": "p"}}}); err != nil {
		t.Fatal(err)
	}
	e.setPolicy(t, "departments/research/policies/training", &workloadv1.Policy{
		Defaults: &workloadv1.WorkloadSpec{RegistryCredential: "reg", ImagePullPolicy: workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_ALWAYS}})
	w := training()
	w.Spec.Image = "registry.example.com/team/train:1"
	got := e.create(t, "team-a", "defaulted", w)
	if s := got.GetSpec(); s.GetRegistryCredential() != "departments/research/credentials/reg" || s.GetImagePullPolicy() != workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_ALWAYS {
		t.Errorf("from the policy: credential %q, policy %v", s.GetRegistryCredential(), s.GetImagePullPolicy())
	}
	_, err := e.client.CreateWorkload(ctx, &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "elsewhere", Workload: training()})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	if _, ok := violations(err)["workload.spec.registry_credential"]; !ok {
		t.Errorf("violations %v, want workload.spec.registry_credential", violations(err))
	}
}
