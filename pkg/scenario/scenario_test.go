package scenario

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// repoScenarios lists the repository's scenarios (scenarios/ at its root,
// and scenarios/next/ whose rules are built): the public examples of the
// contract, copied in and kept equal to ../shared/scenarios by
// scripts/check-scenarios.sh, and the project's own.
func repoScenarios(t *testing.T) []string {
	t.Helper()
	const dir = "../../scenarios"
	var paths []string
	for _, sub := range []string{"", "next"} {
		found, err := filepath.Glob(filepath.Join(dir, sub, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if len(found) == 0 {
			t.Fatalf("no scenarios found in %s", filepath.Join(dir, sub))
		}
		paths = append(paths, found...)
	}
	return paths
}

func mustRun(t *testing.T, sc *Scenario) *Result {
	t.Helper()
	res, err := Run(sc, Options{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// Every scenario of the repository passes: each of its expectations holds.
func TestScenariosPass(t *testing.T) {
	for _, path := range repoScenarios(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			sc, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			res := mustRun(t, sc)
			for _, f := range res.Failures {
				t.Errorf("%s:%d: %s", path, f.Line, f.Msg)
			}
			e := res.Output.Expectations
			if e.Failed != 0 || e.Passed == 0 {
				t.Errorf("expectations: %d passed, %d failed; want some passed and none failed", e.Passed, e.Failed)
			}
			if res.Output.Scenario != sc.Name {
				t.Errorf("output names scenario %q, want %q", res.Output.Scenario, sc.Name)
			}
		})
	}
}

// The same file gives the same JSON, byte for byte: from one loaded
// scenario run twice (Run must not change it) and from the file loaded again.
func TestRunIsDeterministic(t *testing.T) {
	for _, path := range repoScenarios(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			sc, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			again, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			first := marshal(t, mustRun(t, sc))
			for i, sc := range []*Scenario{sc, again} {
				if got := marshal(t, mustRun(t, sc)); !bytes.Equal(first, got) {
					t.Errorf("run %d printed other JSON:\nfirst: %s\nthen:  %s", i+2, first, got)
				}
			}
		})
	}
}

func marshal(t *testing.T, res *Result) []byte {
	t.Helper()
	b, err := json.Marshal(res.Output)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// quickstart is the public quick start with the last expectation replaced.
const quickstart = `name: wrong
nodes:
  - {name: node-1, gpus: 2}
  - {name: node-2, gpus: 2}
projects:
  - name: team-a
    quota: {default: {gpu: 2}}
  - name: team-b
    quota: {default: {gpu: 2}}
actions:
  - submit: {name: a1, project: team-a, gpu: 1}
  - run: 1
  - submit: {name: a2, project: team-a, gpu: 2}
  - run: 1
  - submit: {name: b1, project: team-b, gpu: 1}
  - run: 1
  - submit: {name: b2, project: team-b, gpu: 1}
  - run: 3
`

// An expectation that does not hold is a failure that names the workload
// or queue, and what was wanted and found, at the expectation's line.
func TestWrongExpectationFails(t *testing.T) {
	tests := map[string]struct {
		expect   string
		wantLine int
		wantMsgs []string // each failure message, in order
	}{
		"a workload in the wrong status, with the scheduler's reason": {
			expect:   "  - expect: {running: [a1]}\n",
			wantLine: 19,
			wantMsgs: []string{"workload a1: want Running, got Pending (needs 1 GPU on one node; the largest free block is 0 GPUs; project team-a would hold 3 GPUs with it, above its fair share of 2"},
		},
		"a workload field": {
			expect:   "  - expect:\n      workloads:\n        a2: {gpu: 1, nodes: [node-1]}\n",
			wantLine: 21,
			wantMsgs: []string{"workload a2: gpu: want 1, got 2", "workload a2: nodes: want [node-1], got [node-2]"},
		},
		"a queue number": {
			expect:   "  - expect:\n      queues:\n        team-a: {pool: default, allocated: 3}\n",
			wantLine: 21,
			wantMsgs: []string{"queue team-a in pool default: allocated: want 3, got 2"},
		},
		"the cluster": {
			expect:   "  - expect: {cluster: {allocatedGpus: 3}}\n",
			wantLine: 19,
			wantMsgs: []string{"cluster allocatedGpus: want 3, got 4"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := mustRun(t, mustLoad(t, quickstart+tc.expect))
			if e := res.Output.Expectations; e.Failed != 1 || e.Passed != 0 {
				t.Errorf("expectations: %d passed, %d failed; want 0 and 1", e.Passed, e.Failed)
			}
			if len(res.Failures) != len(tc.wantMsgs) {
				t.Fatalf("failures %+v; want %d", res.Failures, len(tc.wantMsgs))
			}
			for i, f := range res.Failures {
				if f.Line != tc.wantLine || !strings.Contains(f.Msg, tc.wantMsgs[i]) {
					t.Errorf("failure %d: line %d %q; want line %d containing %q", i, f.Line, f.Msg, tc.wantLine, tc.wantMsgs[i])
				}
			}
		})
	}
}
