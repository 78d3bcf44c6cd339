package kube_test

import (
	"strings"
	"testing"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// TestCredentialsNotYetOnKubernetes: the Kubernetes runtime does not give
// pods credentials yet (no Secret is made), so a workload that names one
// fails with that reason and no pod is created, rather than running
// without the values it asked for.
func TestCredentialsNotYetOnKubernetes(t *testing.T) {
	e := newEnv(t, "cred")
	e.node(t, "cred-node-1", 2)
	e.start(t)
	e.project(t, "team-c", 2)
	if _, err := e.rw.CreateCredential(t.Context(), sdk.Scope{Project: "team-c"}, "api", &workloadv1.Credential{
		Type: workloadv1.CredentialType_CREDENTIAL_TYPE_GENERIC, Values: map[string]string{"API_KEY": "v"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rw.SubmitWorkload(t.Context(), "team-c", "uses", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
		&workloadv1.WorkloadSpec{Image: "busybox", Command: []string{"sleep", "3600"}, MilliCpu: 100, MemoryBytes: 100 << 20,
			Credentials: []*workloadv1.CredentialMount{{Credential: "api"}}}); err != nil {
		t.Fatal(err)
	}
	e.projectOf["uses"] = "team-c"
	eventually(t, "the workload failed for its credentials", func() string {
		w := e.get(t, "team-c", "uses")
		if w.GetStatus().GetPhase() != workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED {
			return w.GetStatus().GetPhase().String()
		}
		if msg := w.String(); !strings.Contains(msg, "Credentials are not given to pods in Kubernetes mode yet") {
			return "status " + w.GetStatus().String()
		}
		return ""
	})
	if live, deleting := e.pods(t, "uses"); len(live)+len(deleting) != 0 {
		t.Errorf("%d pods made for a workload whose credentials cannot be given", len(live)+len(deleting))
	}
}
