package scheduler

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
	"github.com/runwayhq/runway/pkg/fairshare"
)

// fakeClock is a clock the test moves; every replica of a test reads it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// timeBased writes nodepools/default with time-based fair share on, as the
// quota service stores it.
func timeBased(t testing.TB, cl *etcdtest.Cluster, halfLife time.Duration, k float64) {
	t.Helper()
	put(t, cl.Client, etcdstore.PrefixNodePools+"default", &quotav1.NodePool{Name: "nodepools/default",
		TimeBasedFairShare: &quotav1.TimeBasedFairShare{HalfLife: durationpb.New(halfLife), K: &k}})
}

// queueUsage is a queue's GetQueue numbers in the default pool.
func queueUsage(t testing.TB, s *Server, name string) *schedulerv1.QueueTimeBasedFairShare {
	t.Helper()
	q, err := s.GetQueue(t.Context(), &schedulerv1.GetQueueRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return q.GetNodePools()[0].GetTimeBasedFairShare()
}

// gpuUsage is a queue's GPU usage from GetQueue, or -1 while the replica
// cannot answer yet (its cache has not read the store).
func gpuUsage(s *Server, name string) float64 {
	q, err := s.GetQueue(context.Background(), &schedulerv1.GetQueueRequest{Name: name})
	if err != nil {
		return -1
	}
	return q.GetNodePools()[0].GetTimeBasedFairShare().GetUsage().GetGpu()
}

func within(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// TestUsageSurvivesRestart: the decayed usage of time-based fair share
// continues across a scheduler restart (the new replica reads the record
// the old leader wrote and accrues the time between), it is not reset; and
// GetQueue shows u, s and w'.
// usedAnHour starts a leader on a pool of 8 GPUs with time-based fair share
// (half-life 1 h, k 1), where team-a's a1 holds 4 GPUs and team-b nothing,
// moves the clock an hour and waits until the leader has accrued and
// written team-a's usage, which it returns: 4·τ/2 GPU-seconds (τ =
// half-life / ln 2).
func usedAnHour(t *testing.T, cl *etcdtest.Cluster, clock *fakeClock, opts func(*Config)) (*replica, float64) {
	t.Helper()
	timeBased(t, cl, time.Hour, 1)
	node(t, cl.Client, "node-1", 8)
	project(t, cl.Client, "team-a", 0)
	project(t, cl.Client, "team-b", 0)
	training(t, cl.Client, "team-a", "a1", 4, 0)

	r1 := startReplica(t, cl, "r1", opts)
	waitFor(t, 5*time.Second, "a1 bound", func() bool { return len(bound(t, cl.Client)) == 1 })
	r1.mu.Lock()
	cycles := r1.cycles
	r1.mu.Unlock()
	waitFor(t, 5*time.Second, "a cycle with a1 in the model", func() bool {
		r1.mu.Lock()
		defer r1.mu.Unlock()
		return r1.cycles >= cycles+2
	})
	clock.Advance(time.Hour)
	want := fairshare.Accrue(0, 4, time.Hour, time.Hour)
	waitFor(t, 5*time.Second, "an hour of usage accrued and written", func() bool {
		resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixUsage+"projects/team-a")
		return within(gpuUsage(r1.Server, "projects/team-a/queue"), want, 1e-6) && err == nil && len(resp.Kvs) == 1
	})
	return r1, want
}

func TestUsageSurvivesRestart(t *testing.T) {
	cl := etcdtest.New(t)
	clock := &fakeClock{now: t0}
	withClock := func(c *Config) { c.Clock = clock.Now; c.UsageInterval = time.Minute }
	r1, want := usedAnHour(t, cl, clock, withClock)
	// team-a used everything: u = 1, s = 0.5, and with k = 1, w' = 0.
	a, b := queueUsage(t, r1.Server, "projects/team-a/queue"), queueUsage(t, r1.Server, "projects/team-b/queue")
	if a.GetUsageShare().GetGpu() != 1 || a.GetWeightShare().GetGpu() != 0.5 || a.GetAdjustedWeight().GetGpu() != 0 {
		t.Errorf("team-a u, s, w' = %v, %v, %v; want 1, 0.5, 0", a.GetUsageShare().GetGpu(), a.GetWeightShare().GetGpu(), a.GetAdjustedWeight().GetGpu())
	}
	if b.GetUsage().GetGpu() != 0 || b.GetUsageShare().GetGpu() != 0 || b.GetAdjustedWeight().GetGpu() != 2 {
		t.Errorf("team-b usage, u, w' = %v, %v, %v; want 0, 0, 2", b.GetUsage().GetGpu(), b.GetUsageShare().GetGpu(), b.GetAdjustedWeight().GetGpu())
	}
	r1.stop()

	// The scheduler is down for an hour; a1 keeps its GPUs. The new
	// replica continues: an hour more of 4 GPUs on top of the decayed first.
	clock.Advance(time.Hour)
	r2 := startReplica(t, cl, "r2", withClock)
	want = fairshare.Accrue(want, 4, time.Hour, time.Hour)
	waitFor(t, 5*time.Second, "the new leader", r2.leading)
	waitFor(t, 5*time.Second, "usage continued by the new leader", func() bool {
		return within(gpuUsage(r2.Server, "projects/team-a/queue"), want, 1e-6)
	})
	if got := queueUsage(t, r2.Server, "projects/team-b/queue").GetUsage().GetGpu(); got != 0 {
		t.Errorf("team-b usage after the restart %v, want 0", got)
	}
}

// TestUsageOnFollower: a replica that does not lead shows the usage the
// leader wrote in its GetQueue, not none.
func TestUsageOnFollower(t *testing.T) {
	cl := etcdtest.New(t)
	clock := &fakeClock{now: t0}
	withClock := func(c *Config) { c.Clock = clock.Now; c.UsageInterval = time.Minute }
	r1, want := usedAnHour(t, cl, clock, withClock)
	r2 := startReplica(t, cl, "r2", withClock)
	waitFor(t, 5*time.Second, "the follower's model", func() bool {
		r2.cache.mu.Lock()
		defer r2.cache.mu.Unlock()
		return r2.cache.ready && r2.cache.state.Workload("team-a/a1").PlacedPods() == 1
	})
	if r2.leading() || !r1.leading() {
		t.Fatal("r1 should lead and r2 follow")
	}
	u := queueUsage(t, r2.Server, "projects/team-a/queue")
	if !within(u.GetUsage().GetGpu(), want, 1e-6) || u.GetUsageShare().GetGpu() != 1 || u.GetAdjustedWeight().GetGpu() != 0 {
		t.Errorf("follower's GetQueue: usage %v (want %v), u %v (want 1), w' %v (want 0)",
			u.GetUsage().GetGpu(), want, u.GetUsageShare().GetGpu(), u.GetAdjustedWeight().GetGpu())
	}
}

// TestUsageRecordsFollowTheSetting: with time-based fair share off no
// record is written, and turning it off deletes the records.
func TestUsageRecordsFollowTheSetting(t *testing.T) {
	cl := etcdtest.New(t)
	clock := &fakeClock{now: t0}
	node(t, cl.Client, "node-1", 8)
	project(t, cl.Client, "team-a", 0)
	training(t, cl.Client, "team-a", "a1", 4, 0)
	r := startReplica(t, cl, "r1", func(c *Config) { c.Clock = clock.Now; c.UsageInterval = time.Minute })
	waitFor(t, 5*time.Second, "a1 bound", func() bool { return len(bound(t, cl.Client)) == 1 })
	records := func() int {
		resp, err := cl.Client.Get(t.Context(), etcdstore.PrefixUsage, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Kvs)
	}
	clock.Advance(time.Hour)
	waitFor(t, 3*time.Second, "a cycle an hour later", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.lastCycle.Equal(clock.Now())
	})
	if n := records(); n != 0 {
		t.Fatalf("%d usage records with time-based fair share off, want 0", n)
	}
	if u := queueUsage(t, r.Server, "projects/team-a/queue"); u != nil {
		t.Fatalf("GetQueue shows time-based numbers %v in a pool without it", u)
	}

	timeBased(t, cl, time.Hour, 1)
	waitFor(t, 3*time.Second, "the setting in the model", func() bool {
		r.cache.mu.Lock()
		defer r.cache.mu.Unlock()
		return r.cache.state.Pool("default").TimeBased.On()
	})
	clock.Advance(time.Hour)
	// department default and team-a
	waitFor(t, 3*time.Second, "two records", func() bool { return records() == 2 })

	put(t, cl.Client, etcdstore.PrefixNodePools+"default", &quotav1.NodePool{Name: "nodepools/default"})
	waitFor(t, 3*time.Second, "the setting off in the model", func() bool {
		r.cache.mu.Lock()
		defer r.cache.mu.Unlock()
		return !r.cache.state.Pool("default").TimeBased.On()
	})
	clock.Advance(time.Hour)
	waitFor(t, 3*time.Second, "no records", func() bool { return records() == 0 })
}
