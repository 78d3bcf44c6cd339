package quota_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
)

// TestRestart: what was acknowledged is there after the service restarts
// on the same etcd, and after etcd itself restarts on its data directory;
// the built-ins are not re-created (same uid, same changes).
func TestRestart(t *testing.T) {
	first := newEnv(t)
	first.mustCreatePool(t, "dgx", map[string]string{"run.ai/type": "dgx"})
	first.mustCreateDepartment(t, "research", gpus("dgx", 8))
	first.mustCreateProject(t, "team-a", "departments/research", gpus("dgx", 4))
	if _, err := first.client.UpdateDepartment(t.Context(), &quotav1.UpdateDepartmentRequest{
		Department: &quotav1.Department{Name: "departments/default", Description: "changed"}}); err != nil {
		t.Fatal(err)
	}
	first.setRejectOverSubscription(t, true)
	want := first.state(t)
	first.stop()

	second := start(t, first.etcd)
	if diff := cmp.Diff(want, second.state(t), protocmp.Transform()); diff != "" {
		t.Fatalf("after a service restart (-before +after):\n%s", diff)
	}
	second.stop()

	first.etcd.Restart(t)
	third := start(t, first.etcd)
	if diff := cmp.Diff(want, third.state(t), protocmp.Transform()); diff != "" {
		t.Fatalf("after an etcd restart (-before +after):\n%s", diff)
	}
}
