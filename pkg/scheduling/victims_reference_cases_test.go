package scheduling_test

import (
	"testing"

	"github.com/runwayhq/runway/pkg/scheduling"
)

// TestVictimsReferenceCases pins the reference to SCHEDULING.md's own
// examples and keeps instances the differential test found.
func TestVictimsReferenceCases(t *testing.T) {
	tests := map[string]struct {
		spec refSpec
		want refOutcome
	}{
		// §3 "Which victims": 1, 3 and 4 GPUs on an 8-GPU node, a 4-GPU J.
		"the 4-GPU victim, not 1 + 3": {
			spec: refSpec{Nodes: []refNode{{"n1", 8}},
				Projects: []refQueue{{"a", "", 4, 0}, {"b", "", 4, 0}},
				Victims: []refWorkload{
					{"v1", "b", "train", 1, 1, 1, 1, []string{"n1"}},
					{"v3", "b", "train", 3, 1, 1, 1, []string{"n1"}},
					{"v4", "b", "train", 4, 1, 1, 0, []string{"n1"}},
				},
				J: refWorkload{"j", "a", "train", 4, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"v4"}},
		},
		"two 0.5 workloads on one device cost two workloads: the 1-GPU victim instead": {
			spec: refSpec{Nodes: []refNode{{"n1", 2}},
				Projects: []refQueue{{"a", "", 1, 0}, {"b", "", 1, 0}},
				Victims: []refWorkload{
					{"h1", "b", "train", 0.5, 1, 1, 1, []string{"n1"}},
					{"h2", "b", "train", 0.5, 1, 1, 1, []string{"n1"}},
					{"v", "b", "train", 1, 1, 1, 0, []string{"n1"}},
				},
				J: refWorkload{"j", "a", "train", 1, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"v"}},
		},
		"the quick start: the 1-GPU a1, not the newer 2-GPU a2": {
			spec: refSpec{Nodes: []refNode{{"node-1", 2}, {"node-2", 2}},
				Projects: []refQueue{{"team-a", "", 2, 0}, {"team-b", "", 2, 0}},
				Victims: []refWorkload{
					{"a1", "team-a", "train", 1, 1, 1, 0, []string{"node-1"}},
					{"a2", "team-a", "train", 2, 1, 1, 1, []string{"node-2"}},
					{"b1", "team-b", "train", 1, 1, 1, 2, []string{"node-1"}},
				},
				J: refWorkload{"j", "team-b", "train", 1, 1, 1, 3, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"a1"}},
		},
		"equal sets: the newest": {
			spec: refSpec{Nodes: []refNode{{"n1", 2}},
				Projects: []refQueue{{"a", "", 1, 0}, {"b", "", 1, 0}},
				Victims: []refWorkload{
					{"old", "b", "train", 1, 1, 1, 0, []string{"n1"}},
					{"new", "b", "train", 1, 1, 1, 1, []string{"n1"}},
				},
				J: refWorkload{"j", "a", "train", 1, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"new"}},
		},
		"the lowest priority group first, even when it costs more GPUs": {
			spec: refSpec{Nodes: []refNode{{"n1", 4}},
				Projects: []refQueue{{"a", "", 2, 0}, {"b", "", 1, 0}},
				Victims: []refWorkload{
					{"t", "b", "train", 2, 1, 1, 0, []string{"n1"}},
					{"i", "b", "interactive-preemptible", 1, 1, 1, 0, []string{"n1"}},
					{"i2", "b", "interactive-preemptible", 1, 1, 1, 0, []string{"n1"}},
				},
				J: refWorkload{"j", "a", "train", 1, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"t"}},
		},
		"preemption inside the project: the lower priority, the newest": {
			spec: refSpec{Nodes: []refNode{{"n1", 2}},
				Projects: []refQueue{{"p", "", 2, 0}},
				Victims: []refWorkload{
					{"t1", "p", "train", 1, 1, 1, 0, []string{"n1"}},
					{"t2", "p", "train", 1, 1, 1, 1, []string{"n1"}},
				},
				J: refWorkload{"j", "p", "interactive-preemptible", 1, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RulePreempt, Units: []string{"t2"}},
		},
		"an elastic workload gives its pods above the minimum, last placed first": {
			spec: refSpec{Nodes: []refNode{{"n1", 3}},
				Projects: []refQueue{{"a", "", 1, 0}, {"b", "", 1, 0}},
				Victims: []refWorkload{
					{"e", "b", "train", 1, 3, 1, 0, []string{"n1", "n1", "n1"}},
				},
				J: refWorkload{"j", "a", "train", 1, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"e/2"}},
		},
		"the queue allocate would serve last gives first, even at more GPUs": {
			// fair shares a 1, b 1, c 2: b (2 GPUs over a ceiling of 1) sorts
			// after c (2 over 2), so G1 is b's and k = 1 takes vb.
			spec: refSpec{Nodes: []refNode{{"n1", 4}},
				Projects: []refQueue{{"a", "", 2, 0}, {"b", "", 0, 0}, {"c", "", 1, 0}},
				Victims: []refWorkload{
					{"vb", "b", "train", 2, 1, 1, 0, []string{"n1"}},
					{"vc1", "c", "train", 1, 1, 1, 1, []string{"n1"}},
					{"vc2", "c", "train", 1, 1, 1, 1, []string{"n1"}},
				},
				J: refWorkload{"j", "a", "train", 1, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"vb"}},
		},
		"each victim sees the earlier ones gone: b may give one GPU, not two": {
			spec: refSpec{Nodes: []refNode{{"n1", 3}},
				Projects: []refQueue{{"a", "", 2, 0}, {"b", "", 2, 0}},
				Victims: []refWorkload{
					{"b1", "b", "train", 1, 1, 1, 0, []string{"n1"}},
					{"b2", "b", "train", 1, 1, 1, 1, []string{"n1"}},
					{"b3", "b", "train", 1, 1, 1, 2, []string{"n1"}},
				},
				J: refWorkload{"j", "a", "train", 2, 1, 1, 3, nil}},
			want: refOutcome{},
		},
		"the after rule: j's department may not end more saturated than the one it takes from": {
			// Evicting v1 leaves d1 at 3 GPUs of a fair share of 2, d2 at 0.
			spec: refSpec{Nodes: []refNode{{"n1", 4}},
				Depts:    []refQueue{{"d1", "", 2, 0}, {"d2", "", 2, 0}},
				Projects: []refQueue{{"p1", "d1", 1, 0}, {"p2", "d2", 1, 0}, {"p3", "d1", 2, 0}},
				Victims: []refWorkload{
					{"v1", "p2", "train", 3, 1, 1, 1, []string{"n1"}},
					{"v2", "p1", "build", 1, 1, 1, 2, []string{"n1"}},
				},
				J: refWorkload{"j", "p3", "interactive-preemptible", 2, 1, 1, 10, nil}},
			want: refOutcome{},
		},
		// Ambiguity: SCHEDULING.md does not say whether "newest" compares a
		// set's units or its distinct workloads. Both sets below free 3 GPUs
		// from 2 workloads and stop one; by units [e, e, x] is newer than
		// [e, y] (the reading here, and Cycle's); by workloads {e, y} would
		// beat {e, x} and the answer would be e/3 and y. (e whole would free
		// 4.)
		"newest compares units: two pods of the newest e and the old x, not one pod of e and y": {
			spec: refSpec{Nodes: []refNode{{"n1", 7}},
				Projects: []refQueue{{"a", "", 3, 0}, {"b", "", 0, 0}},
				Victims: []refWorkload{
					{"x", "b", "train", 1, 1, 1, 0, []string{"n1"}},
					{"y", "b", "train", 2, 1, 1, 1, []string{"n1"}},
					{"e", "b", "train", 1, 4, 2, 2, []string{"n1", "n1", "n1", "n1"}},
				},
				J: refWorkload{"j", "a", "train", 3, 1, 1, 3, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"e/2", "e/3", "x"}},
		},
		// "Which victims": a set holding every extra pod of an elastic
		// workload may hold its remaining pods too; it is then evicted whole.
		"preempt: an elastic workload above its minimum is evicted whole when only all of it makes room": {
			spec: refSpec{Nodes: []refNode{{"n1", 2}},
				Projects: []refQueue{{"p", "", 2, 0}},
				Victims: []refWorkload{
					{"e", "p", "train", 1, 2, 1, 0, []string{"n1", "n1"}},
				},
				J: refWorkload{"j", "p", "inference", 2, 1, 1, 10, nil}},
			want: refOutcome{Rule: scheduling.RulePreempt, Units: []string{"e"}},
		},
		"reclaim: an elastic workload above its minimum is evicted whole": {
			spec: refSpec{Nodes: []refNode{{"n1", 2}},
				Projects: []refQueue{{"a", "", 2, 0}, {"b", "", 0, 0}},
				Victims: []refWorkload{
					{"e", "b", "train", 1, 2, 1, 0, []string{"n1", "n1"}},
				},
				J: refWorkload{"j", "a", "train", 2, 1, 1, 10, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"e"}},
		},
		// Equal GPUs: the fewest workloads sent back to Pending first, so
		// two elastic workloads each lose a pod and both keep running.
		"reclaim: two elastic workloads trimmed rather than one stopped": {
			spec: refSpec{Nodes: []refNode{{"n1", 4}},
				Projects: []refQueue{{"a", "", 2, 0}, {"b", "", 0, 0}},
				Victims: []refWorkload{
					{"e1", "b", "train", 1, 2, 1, 0, []string{"n1", "n1"}},
					{"e2", "b", "train", 1, 2, 1, 1, []string{"n1", "n1"}},
				},
				J: refWorkload{"j", "a", "train", 2, 1, 1, 10, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"e1/1", "e2/1"}},
		},
		// Equal GPUs and one workload stopped either way: then the fewest
		// touched, so the elastic e whole, not its extra pod and w.
		"preempt: an elastic workload whole before its extra pod and a whole workload": {
			spec: refSpec{Nodes: []refNode{{"n1", 3}},
				Projects: []refQueue{{"p", "", 3, 0}},
				Victims: []refWorkload{
					{"w", "p", "train", 1, 1, 1, 0, []string{"n1"}},
					{"e", "p", "train", 1, 2, 1, 1, []string{"n1", "n1"}},
				},
				J: refWorkload{"j", "p", "build", 2, 1, 1, 10, nil}},
			want: refOutcome{Rule: scheduling.RulePreempt, Units: []string{"e"}},
		},
		"preempt: a gang takes an elastic workload whole and trims another": {
			spec: refSpec{Nodes: []refNode{{"n1", 2}, {"n2", 2}},
				Projects: []refQueue{{"p", "", 4, 0}},
				Victims: []refWorkload{
					{"e1", "p", "train", 1, 2, 1, 0, []string{"n1", "n1"}},
					{"e2", "p", "train", 1, 2, 1, 1, []string{"n2", "n2"}},
				},
				J: refWorkload{"j", "p", "build", 1, 3, 3, 10, nil}},
			want: refOutcome{Rule: scheduling.RulePreempt, Units: []string{"e1/1", "e2"}},
		},
		// Found by TestVictimsMatchReference (bug A: victims that lift a limit).
		"preempt: a project at its limit frees two 1-GPU workloads for a 2-GPU J that fits the idle devices": {
			spec: refSpec{Nodes: []refNode{{"n1", 4}},
				Projects: []refQueue{{"p", "", 2, 2}},
				Victims: []refWorkload{
					{"t1", "p", "train", 1, 1, 1, 0, []string{"n1"}},
					{"t2", "p", "train", 1, 1, 1, 1, []string{"n1"}},
				},
				J: refWorkload{"j", "p", "interactive-preemptible", 2, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RulePreempt, Units: []string{"t1", "t2"}},
		},
		"preempt: the victim that lifts the limit runs on a node J cannot use": {
			spec: refSpec{Nodes: []refNode{{"n1", 1}, {"n2", 4}},
				Projects: []refQueue{{"p", "", 4, 4}},
				Victims: []refWorkload{
					{"t1", "p", "train", 1, 1, 1, 0, []string{"n1"}},
				},
				J: refWorkload{"j", "p", "interactive-preemptible", 4, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RulePreempt, Units: []string{"t1"}},
		},
		"reclaim: victims of a sibling project lift the department's limit": {
			spec: refSpec{Nodes: []refNode{{"n1", 8}},
				Depts:    []refQueue{{"d1", "", 2, 4}, {"d2", "", 4, 0}},
				Projects: []refQueue{{"p1", "d1", 2, 0}, {"p2", "d1", 0, 0}, {"p3", "d2", 4, 0}},
				Victims: []refWorkload{
					{"v1", "p2", "train", 2, 1, 1, 0, []string{"n1"}},
					{"v2", "p2", "train", 2, 1, 1, 1, []string{"n1"}},
				},
				J: refWorkload{"j", "p1", "train", 2, 1, 1, 2, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"v2"}},
		},
		// Found by TestVictimsMatchReference (bug B: the after rule is not
		// monotone). Evicting v1 alone leaves d1 at 3/2 GPUs, more saturated
		// than d2 at 0/2; also evicting v2 (p1, above its fair share of 0)
		// leaves d1 at 2/2: the after rule holds.
		"reclaim: a victim of j's own department brings it within the after rule (one pod)": {
			spec: refSpec{Nodes: []refNode{{"n1", 4}},
				Depts:    []refQueue{{"d1", "", 2, 0}, {"d2", "", 2, 0}},
				Projects: []refQueue{{"p1", "d1", 0, 0}, {"p2", "d2", 1, 0}, {"p3", "d1", 2, 0}},
				Victims: []refWorkload{
					{"v1", "p2", "train", 3, 1, 1, 1, []string{"n1"}},
					{"v2", "p1", "train", 1, 1, 1, 2, []string{"n1"}},
				},
				J: refWorkload{"j", "p3", "interactive-preemptible", 2, 1, 1, 10, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"v1", "v2"}},
		},
		"reclaim: a victim of j's own department brings it within the after rule (a gang)": {
			spec: refSpec{Nodes: []refNode{{"n1", 4}},
				Depts:    []refQueue{{"d1", "", 2, 0}, {"d2", "", 2, 0}},
				Projects: []refQueue{{"p1", "d1", 0, 0}, {"p2", "d2", 1, 0}, {"p3", "d1", 2, 0}},
				Victims: []refWorkload{
					{"v1", "p2", "train", 3, 1, 1, 1, []string{"n1"}},
					{"v2", "p1", "train", 1, 1, 1, 2, []string{"n1"}},
				},
				J: refWorkload{"j", "p3", "interactive-preemptible", 1, 2, 2, 10, nil}},
			want: refOutcome{Rule: scheduling.RuleReclaim, Units: []string{"v1", "v2"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, s, err := cycleOutcome(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if ref := refVictims(tc.spec, s); ref.String() != tc.want.String() {
				t.Errorf("the reference evicts %s, want %s", ref, tc.want)
			}
			if got.String() != tc.want.String() {
				t.Errorf("Cycle evicts %s, want %s", got, tc.want)
			}
		})
	}
}
