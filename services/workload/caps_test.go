package workload_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/workload"
)

// A project holds at most its cap of workloads and of open watch streams,
// others are not affected, and a workload's environment is bounded as a
// whole; a refused create writes nothing.
func TestPerProjectCaps(t *testing.T) {
	e := startWith(t, &fixedClock{}, workload.Config{MaxWorkloadsPerProject: 3, MaxWatchesPerProject: 2})
	e.addProjects(t, "team-a", "team-b")
	for _, id := range []string{"w1", "w2", "w3"} {
		e.create(t, "team-a", id, training())
	}
	before, rev := e.storeState(t)
	_, err := e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-a", WorkloadId: "w4", Workload: training()})
	md := wantError(t, err, codes.ResourceExhausted, "OBJECT_LIMIT_EXCEEDED")
	if md["project"] != "projects/team-a" || md["kind"] != "workloads" || md["limit"] != "3" {
		t.Errorf("metadata %v", md)
	}
	if after, rev2 := e.storeState(t); rev2 != rev || len(after) != len(before) {
		t.Errorf("the refused create wrote something (revision %d → %d)", rev, rev2)
	}
	e.create(t, "team-b", "w1", training()) // another project has its own room

	big := training()
	for i := range 40 {
		big.Spec.Env = append(big.Spec.Env, &workloadv1.EnvVar{Name: "V" + strings.Repeat("X", i), Value: strings.Repeat("v", 4000)})
	}
	_, err = e.client.CreateWorkload(t.Context(), &workloadv1.CreateWorkloadRequest{Parent: "projects/team-b", WorkloadId: "big", Workload: big})
	wantError(t, err, codes.InvalidArgument, "INVALID_FIELD")
	if v := violations(err); !strings.Contains(v["workload.spec.env"], "at most") {
		t.Errorf("violations %v, want workload.spec.env's size", v)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var open []workloadv1.WorkloadService_WatchWorkloadsClient
	for range 2 {
		w, err := e.client.WatchWorkloads(ctx, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatalf("watch: %v", err)
		}
		open = append(open, w)
	}
	w, err := e.client.WatchWorkloads(ctx, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a"})
	if err == nil {
		_, err = w.Recv()
	}
	wantError(t, err, codes.ResourceExhausted, "OBJECT_LIMIT_EXCEEDED")
	other, err := e.client.WatchWorkloads(ctx, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-b"})
	if err == nil {
		_, err = other.Recv()
	}
	if err != nil {
		t.Errorf("a watch on team-b while team-a is full: %v", err)
	}
	// A stream that ends gives its place back.
	cancel()
	for _, w := range open {
		for {
			if _, err := w.Recv(); err != nil {
				break
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithCancel(t.Context())
		w, err := e.client.WatchWorkloads(ctx, &workloadv1.WatchWorkloadsRequest{Parent: "projects/team-a"})
		if err == nil {
			_, err = w.Recv()
		}
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a watch on team-a after two ended: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
