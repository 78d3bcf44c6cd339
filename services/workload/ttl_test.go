package workload_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	identityv1 "github.com/runwayhq/runway/gen/go/runway/identity/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
)

// A finished workload is deleted once its time to live has passed on the
// clock (the sweep, without any event), with an audit record of the
// deletion written in the same transaction; one without a TTL stays.
func TestTTLAfterFinished_DeletedAndAudited(t *testing.T) {
	e, clk := limited(t)
	ttl := training()
	ttl.Spec.TtlAfterFinishedSeconds = 3600
	w := e.create(t, "team-a", "ttl", ttl)
	keep := e.create(t, "team-a", "keep", training())
	for _, id := range []string{"ttl", "keep"} {
		e.bindRunning(t, "n1", "team-a", id, 0)
		e.report(t, "n1", "team-a", id, 0, workloadv1.PodState_POD_STATE_SUCCEEDED, 0)
	}
	e.await(t, w.GetName(), "completed", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED))
	e.await(t, keep.GetName(), "completed", phaseIs(workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED))
	clk.advance(59 * time.Minute)
	time.Sleep(20 * tick) // several sweeps: not yet
	if _, err := e.client.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: w.GetName()}); err != nil {
		t.Fatalf("before its TTL: %v", err)
	}
	clk.advance(time.Minute)
	waitCount(t, "the workload past its TTL deleted", func() int64 {
		_, err := e.client.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: w.GetName()})
		if status.Code(err) == codes.NotFound {
			return 0
		}
		return 1
	})
	if _, err := e.client.GetWorkload(t.Context(), &workloadv1.GetWorkloadRequest{Name: keep.GetName()}); err != nil {
		t.Errorf("the workload without a TTL: %v", err)
	}
	resp, err := e.etcd.Client.Get(t.Context(), etcdstore.PrefixAudit, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, kv := range resp.Kvs {
		ev := new(identityv1.AuditEvent)
		if err := proto.Unmarshal(kv.Value, ev); err != nil {
			t.Fatal(err)
		}
		found = append(found, ev.GetPrincipal()+" "+ev.GetMethod()+" "+ev.GetResource())
	}
	want := "system:workload-controller /runway.workload.v1.WorkloadService/DeleteWorkload projects/team-a/workloads/ttl"
	if len(found) != 1 || found[0] != want {
		t.Errorf("audit %q, want one %q", found, want)
	}
}
