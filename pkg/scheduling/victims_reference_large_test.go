package scheduling_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/runwayhq/runway/pkg/cluster"
	"github.com/runwayhq/runway/pkg/scheduling"
)

// TestVictimsMatchReferenceLarge is the differential test on larger
// instances (refLarge): three departments whose victim groups share nodes,
// up to 14 candidate units, j one pod. The draws must keep meeting reclaims
// from j's department whose victims come after candidates of another
// department in the victim order (where the search defers the other's
// groups when their units fail the after rule alone, and finds them node
// by node), and reclaims from another department.
//
// Past 12 candidate units or running workloads with candidates in j's
// department and another, the search is not exhaustive (README "The victim search"): node by node,
// or greedy. Victims of j's department ease the after rule, so the
// reference's set may then need units on other nodes than the one j lands
// on, or one that greedy pruning does not reach. There Cycle may find no
// set, and a set it finds must be one the rules allow that makes room, and
// no better than the reference's (which would prove one of them wrong);
// those instances are counted apart, as are those where Cycle lets j wait
// because the room would be taken again in the cycle (refRetaken).
func TestVictimsMatchReferenceLarge(t *testing.T) {
	counts := map[string]int{}
	rapid.Check(t, func(t *rapid.T) {
		sp := refDraw(t, refLarge)
		got, want, s, problem := refDiff(sp)
		kind := refKind(s, want)
		if got.retaken {
			kind = refRetaken
		}
		if problem != "" && want.Rule == scheduling.RuleReclaim && got.Rule != scheduling.RulePreempt && refNotExhaustive(s) {
			problem, kind = refNoBetter(sp, s, got, want), "reclaim past the exhaustive search"
		}
		if problem != "" {
			t.Fatalf("%s\n%#v", problem, sp)
		}
		counts[kind]++
	})
	t.Logf("instances by the reference's outcome: %v", counts)
	total := 0
	for _, n := range counts {
		total += n
	}
	refRetakenRare(t, counts[refRetaken], total)
	// About 10%, 20%, 15% and 15% of the instances at 150.
	for _, c := range []struct {
		kinds []string
		min   float64
	}{
		{[]string{"reclaim from j's department, behind another's candidates", "reclaim from j's department and another"}, 0.03},
		{[]string{"reclaim from other departments"}, 0.08},
		{[]string{"no set makes room"}, 0.05},
		{[]string{"the reclaim gate fails"}, 0.05},
	} {
		n := 0
		for _, k := range c.kinds {
			n += counts[k]
		}
		if share := float64(n) / float64(total); share < c.min {
			t.Errorf("%s: %d of %d instances (%.0f%%), want at least %.0f%%", strings.Join(c.kinds, " or "), n, total, 100*share, 100*c.min)
		}
	}
}

// refKind names an outcome for the large draws: for a reclaim, whose
// departments its victims are in, and whether candidates of another
// department come before them in the victim order.
func refKind(s *cluster.State, o refOutcome) string {
	if o.Rule != scheduling.RuleReclaim {
		if o.Rule != "" {
			return string(o.Rule)
		}
		return o.why
	}
	j := s.Workload("j")
	own, other := false, false
	first := map[*cluster.Queue]bool{}
	for _, u := range o.Units {
		name, _, _ := strings.Cut(u, "/")
		v := s.Workload(name).Project
		first[v] = true
		if v.Parent == j.Project.Parent {
			own = true
		} else {
			other = true
		}
	}
	switch {
	case own && other:
		return "reclaim from j's department and another"
	case other:
		return "reclaim from other departments"
	}
	for _, v := range refVictimQueues(s, j.Project) {
		if first[v] {
			break
		}
		if v.Parent != j.Project.Parent && len(refGroups(s, []*cluster.Queue{v}, func(*cluster.Workload) bool { return true })) > 0 {
			return "reclaim from j's department, behind another's candidates"
		}
	}
	return "reclaim from j's department"
}

// refNotExhaustive: candidates in j's department and another, and more
// than 12 candidate units or running workloads (non-preemptible ones too)
// in the other projects.
func refNotExhaustive(s *cluster.State) bool {
	j := s.Workload("j")
	queues := refVictimQueues(s, j.Project)
	units := refGroups(s, queues, func(*cluster.Workload) bool { return true })
	own, other := false, false
	for _, u := range units {
		own = own || u.w.Project.Parent == j.Project.Parent
		other = other || u.w.Project.Parent != j.Project.Parent
	}
	running := 0
	for _, q := range queues {
		running += len(q.Running())
	}
	return own && other && (len(units) > 12 || running > 12)
}

// refNoBetter checks Cycle's reclaim set got against the reference's want:
// the rules allow it, it makes room, and it does not come before want.
func refNoBetter(sp refSpec, s *cluster.State, got, want refOutcome) string {
	j := s.Workload("j")
	set := func(ids []string) refSet {
		var units []refUnit
		for _, u := range refGroups(s, refVictimQueues(s, j.Project), func(*cluster.Workload) bool { return true }) {
			if slices.Contains(ids, u.id) {
				units = append(units, u)
			}
		}
		return newRefSet(units)
	}
	if got.Rule == "" {
		return "" // the per-node search holds no set the rules allow
	}
	g, w := set(got.Units), set(want.Units)
	switch {
	case len(g.units) != len(got.Units):
		return fmt.Sprintf("Cycle evicts %s for j, not all of them candidates", got)
	case !refReclaimRules(s, j, j.Pod.GPU*int64(j.Pods), g) || !refMakesRoom(sp, g.units):
		return fmt.Sprintf("Cycle evicts %s for j, which the rules forbid or which makes no room; SCHEDULING.md: %s", got, want)
	case compareSets(g, w) < 0:
		return fmt.Sprintf("Cycle evicts %s for j, which comes before the reference's %s", got, want)
	}
	return ""
}
