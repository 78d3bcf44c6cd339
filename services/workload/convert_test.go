package workload_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/clusterproto"
)

// Whatever CreateWorkload stores converts: the service's defaults and the
// scheduler's agree.
func TestToClusterSpec_OfCreatedWorkloads(t *testing.T) {
	e := start(t)
	e.addProjects(t, "team-a")
	w := e.create(t, "team-a", "a1", training())
	got, err := clusterproto.ToClusterSpec(w)
	if err != nil {
		t.Fatal(err)
	}
	want := cluster.WorkloadSpec{ID: "team-a/a1", Name: "a1", Project: "team-a", Type: "training",
		Priority: cluster.PriorityTrain, Pods: 1, MinPods: 1, Pod: cluster.PodRequest{GPU: 1000},
		Submitted: time.Duration(t0.UnixNano())}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToClusterSpec (-want +got):\n%s", diff)
	}
}
