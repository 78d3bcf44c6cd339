package workload

import (
	"testing"

	"github.com/runwayhq/runway/pkg/apierr"
)

// One caller at its cap leaves every other caller its own room, on the
// same project and on every project's watch; a project's cap and the
// process's hold across callers; a release gives the place back.
func TestWatchCapsPerCaller(t *testing.T) {
	var o openWatches
	caps := watchCaps{perCaller: 2, perProject: 3, total: 6}
	open := func(caller, project string) (func(), string) {
		t.Helper()
		r, err := o.open(caller, project, caps)
		if err != nil {
			return nil, apierr.Reason(err)
		}
		return r, ""
	}
	for range 2 {
		if _, why := open("users/greedy", "-"); why != "" {
			t.Fatalf("greedy's first watches: %s", why)
		}
	}
	if _, why := open("users/greedy", "-"); why != "WATCH_LIMIT_EXCEEDED" {
		t.Errorf("greedy's third watch: %q, want WATCH_LIMIT_EXCEEDED", why)
	}
	release, why := open("users/other", "-")
	if why != "" {
		t.Fatalf("another caller's watch of every project while greedy is full: %s", why)
	}
	if _, why := open("users/other", "team-a"); why != "" {
		t.Fatalf("another caller's project watch: %s", why)
	}
	if _, why := open("users/third", "team-a"); why != "" {
		t.Fatalf("a third caller's project watch: %s", why)
	}
	if _, why := open("users/fourth", "team-a"); why != "" {
		t.Fatalf("the project's third watch: %s", why)
	}
	// team-a holds 3, the process 6.
	if _, why := open("users/fifth", "team-a"); why != "OBJECT_LIMIT_EXCEEDED" {
		t.Errorf("team-a's fourth watch: %q, want OBJECT_LIMIT_EXCEEDED", why)
	}
	if _, why := open("users/fifth", "team-b"); why != "WATCH_LIMIT_EXCEEDED" {
		t.Errorf("the process's seventh watch: %q, want WATCH_LIMIT_EXCEEDED", why)
	}
	release()
	if _, why := open("users/fifth", "team-b"); why != "" {
		t.Errorf("a watch after one ended: %s", why)
	}
}
