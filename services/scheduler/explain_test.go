package scheduler

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// ExplainWorkload reports what was written, not what a cycle planned: a
// placement whose writes were not committed (here: too many for one
// transaction) is NOT_PLACED with why, never PLACED.
func TestExplain_onlyWhatWasWritten(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	// One write per transaction: a binding (its key and its pod key) never fits.
	r := startReplica(t, cl, "r1", func(c *Config) { c.MaxOps = 2; c.Interval = 20 * time.Millisecond })
	waitFor(t, 5*time.Second, "a leader", r.leading)
	training(t, cl.Client, "team-a", "a1", 1, 0)
	explain := func() *schedulerv1.Decision {
		ex, err := r.ExplainWorkload(t.Context(), &schedulerv1.ExplainWorkloadRequest{Name: "projects/team-a/workloads/a1"})
		if err != nil {
			return nil
		}
		return ex.GetLastDecision()
	}
	waitFor(t, 3*time.Second, "a1 explained", func() bool {
		d := explain()
		return d != nil && d.GetOutcome() != schedulerv1.DecisionOutcome_DECISION_OUTCOME_NOT_CONSIDERED
	})
	r.mu.Lock()
	cycles := r.cycles
	r.mu.Unlock()
	waitFor(t, 3*time.Second, "two more cycles", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.cycles >= cycles+2
	})
	if got := bound(t, cl.Client); len(got) != 0 {
		t.Fatalf("bound %v with one write per transaction, want nothing", got)
	}
	d := explain()
	if d.GetOutcome() != schedulerv1.DecisionOutcome_DECISION_OUTCOME_NOT_PLACED || !strings.Contains(d.GetMessage(), "not written") ||
		!strings.Contains(d.GetMessage(), "over 1 per transaction") {
		t.Errorf("a1's last decision %v, want NOT_PLACED saying its plan was not written and why", d)
	}
}

// The last events kept for ExplainWorkload do not outlive their
// workloads: a deleted or finished workload's entry goes at the next cycle.
func TestExplain_lastEventsOfGoneWorkloadsDropped(t *testing.T) {
	cl := etcdtest.New(t)
	quickStart(t, cl)
	r := startReplica(t, cl, "r1", func(c *Config) { c.Interval = 20 * time.Millisecond })
	waitFor(t, 5*time.Second, "a leader", r.leading)
	training(t, cl.Client, "team-a", "a1", 1, 0)
	training(t, cl.Client, "team-a", "a2", 1, 1)
	training(t, cl.Client, "team-b", "b1", 1, 2)
	events := func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Sorted(maps.Keys(r.lastEvents))
	}
	waitFor(t, 3*time.Second, "three placements recorded", func() bool { return len(events()) == 3 })
	if _, err := cl.Client.Delete(t.Context(), etcdstore.PrefixWorkloads+"team-a/a1"); err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixWorkloads+"team-a/a2")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("a2: %v", err)
	}
	w := &workloadv1.Workload{}
	if err := proto.Unmarshal(resp.Kvs[0].Value, w); err != nil {
		t.Fatal(err)
	}
	w.Status.Phase = workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED
	put(t, cl.Client, etcdstore.PrefixWorkloads+"team-a/a2", w)
	waitFor(t, 3*time.Second, "only b1's event left", func() bool { return slices.Equal(events(), []string{"team-b/b1"}) })
}
