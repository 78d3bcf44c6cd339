package scheduler

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// reasonsRecord reads the pending reasons record of workload
// ("project/workload"): its messages and ModRevision (0 when absent).
func reasonsRecord(t testing.TB, cl *etcdtest.Cluster, workload string) ([]string, int64) {
	t.Helper()
	resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixReasons+workload)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0
	}
	st := &workloadv1.WorkloadStatus{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, st); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range st.GetPendingReasons() {
		out = append(out, r.GetMessage())
	}
	return out, resp.Kvs[0].ModRevision
}

func (r *replica) cycleCount() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cycles
}

// TestPendingReasonsRecord: a workload that cannot fit gets a reasons record
// with the numbers; unchanged reasons are not rewritten over several
// cycles; the record is deleted once the workload is placed.
func TestPendingReasonsRecord(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	r := startReplica(t, cl, "r1")
	waitFor(t, 5*time.Second, "a leader", r.leading)

	training(t, cl.Client, "team-a", "big", 4, 1)
	var reasons []string
	var rev int64
	waitFor(t, 5*time.Second, "a reasons record for team-a/big", func() bool {
		reasons, rev = reasonsRecord(t, cl, "team-a/big")
		return rev != 0
	})
	joined := strings.Join(reasons, "; ")
	t.Logf("reasons: %s", joined)
	if !strings.Contains(joined, "needs 4 GPUs on one node; the largest free block is 2 GPUs") {
		t.Errorf("reasons %q do not give the numbers (4 GPUs needed, 2 free per node)", joined)
	}

	// Several cycles later the record has not been rewritten.
	start := r.cycleCount()
	waitFor(t, 5*time.Second, "3 more cycles", func() bool { return r.cycleCount() >= start+3 })
	if _, again := reasonsRecord(t, cl, "team-a/big"); again != rev {
		t.Errorf("unchanged reasons rewritten: ModRevision %d, then %d", rev, again)
	}

	// Asking for 2 GPUs makes it fit: placed, and the record is gone in
	// the same transaction as its binding.
	training(t, cl.Client, "team-a", "big", 2, 1)
	waitFor(t, 5*time.Second, "team-a/big bound", func() bool {
		b := bound(t, cl.Client)
		return len(b) == 1 && b[0] == "team-a/big"
	})
	if got, rev := reasonsRecord(t, cl, "team-a/big"); rev != 0 {
		t.Errorf("reasons record still there after placement: %q", got)
	}
}

// TestPendingReasonsNewLeader: a record left by a former leader for a
// workload that is no longer waiting is deleted by the next leader, and a
// waiting workload's record is written once.
func TestPendingReasonsNewLeader(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	put(t, cl.Client, etcdstore.PrefixReasons+"team-a/gone", &workloadv1.WorkloadStatus{
		PendingReasons: []*workloadv1.PendingReason{{Message: "old"}}})
	training(t, cl.Client, "team-a", "big", 4, 1)
	r := startReplica(t, cl, "r1")
	waitFor(t, 5*time.Second, "a leader", r.leading)
	waitFor(t, 5*time.Second, "the stale record deleted and team-a/big's written", func() bool {
		_, gone := reasonsRecord(t, cl, "team-a/gone")
		_, big := reasonsRecord(t, cl, "team-a/big")
		return gone == 0 && big != 0
	})
}
