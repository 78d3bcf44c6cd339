package scheduler

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/etcdstore/etcdtest"
)

// TestWhileLeading: Config.WhileLeading runs on the leader only, ends
// before the leader's Run returns, and starts on the replica that takes
// over.
func TestWhileLeading(t *testing.T) {
	cl := etcdtest.New(t)
	var mu sync.Mutex
	running := map[string]bool{}
	runningNow := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(maps.Keys(running))
	}
	hook := func(name string) func(*Config) {
		return func(c *Config) {
			c.WhileLeading = func(ctx context.Context) error {
				mu.Lock()
				running[name] = true
				mu.Unlock()
				<-ctx.Done()
				mu.Lock()
				delete(running, name)
				mu.Unlock()
				return nil
			}
		}
	}
	a, b := startReplica(t, cl, "a", hook("a")), startReplica(t, cl, "b", hook("b"))
	waitFor(t, 5*time.Second, "a leader", func() bool { return a.leading() || b.leading() })
	leader, other := a, b
	if b.leading() {
		leader, other = b, a
	}
	waitFor(t, 5*time.Second, "the leader's runtime", func() bool {
		return slices.Equal(runningNow(), []string{leader.cfg.Replica})
	})
	leader.stop()
	if slices.Contains(runningNow(), leader.cfg.Replica) {
		t.Fatalf("the stopped leader's runtime still runs: %v", runningNow())
	}
	waitFor(t, 5*time.Second, "the new leader's runtime", func() bool {
		return slices.Equal(runningNow(), []string{other.cfg.Replica})
	})
}
