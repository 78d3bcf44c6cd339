package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/fairshare"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// writeFile puts content in a fresh directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, content string) *Scenario {
	t.Helper()
	sc, err := Load(writeFile(t, "s.yaml", content))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return sc
}

// The repository's scenarios (the contract's public examples among them) all load.
func TestLoadRepoScenarios(t *testing.T) {
	for _, path := range repoScenarios(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			sc, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if want := strings.TrimSuffix(filepath.Base(path), ".yaml"); sc.Name != want {
				t.Errorf("Name = %q, want %q (the file's name)", sc.Name, want)
			}
			if len(sc.Actions) == 0 {
				t.Error("no actions")
			}
		})
	}
}

func TestLoadDefaults(t *testing.T) {
	path := writeFile(t, "min.yaml", `name: min
nodes:
  - name: n
projects:
  - name: p
    quota:
      default: {}
actions:
  - submit: {name: w, project: p}
  - run:
  - expect: {}
`)
	sc, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Scenario{
		Path:      path,
		Name:      "min",
		Config:    Config{Placement: "binpack", Cycle: time.Second},
		NodePools: []string{"default"},
		Nodes:     []Node{{Name: "n", Pool: "default", GPUMemoryGiB: 80, CPU: 64, MemoryGiB: 512, Line: 3}},
		Projects: []Project{{Name: "p", Line: 5, Quota: []PoolQuota{{Pool: "default",
			Quota: Quota{CPU: -1, MemoryGiB: -1, OverQuotaWeight: 1, Limit: -1, OverQuota: true}}}}},
		Actions: []Action{
			{Line: 9, Kind: ActionSubmit, Submits: []Submit{{Name: "w", Project: "p", Type: "training",
				Pods: 1, MinPods: 1, Pools: []string{"default"}, Line: 9}}},
			{Line: 10, Kind: ActionRun, Run: 0},
			{Line: 11, Kind: ActionExpect, Expect: &Expect{Line: 11}},
		},
	}
	if diff := cmp.Diff(want, sc); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadEverything(t *testing.T) {
	path := writeFile(t, "all.yaml", `name: all-fields
description: every field set
config: {placement: spread, cycle: 30s}
nodePools:
  - {name: a100, timeBasedFairShare: {halfLife: 1h, k: 0.5}}
  - name: default
  - {name: h100, timeBasedFairShare: {halfLife: 30m}}
nodes:
  - {name: big, pool: h100, gpus: 8, gpuMemoryGiB: 141, cpu: 128, memoryGiB: 2048, labels: {run.ai/type: dgx}}
departments:
  - {name: research, quota: {h100: {gpu: 8}, a100: {gpu: 2}}}
projects:
  - name: team-a
    department: research
    quota:
      h100: {gpu: 2.5, cpu: 10, memoryGiB: 100, overQuotaWeight: 0, overQuota: false, limit: 4}
actions:
  - submit:
      name: a1
      project: team-a
      type: inference
      priority: interactive-preemptible
      gpuMemoryGiB: 20
      cpu: 0.5
      memoryGiB: 2
      pods: 3
      minPods: 2
      pool: [h100, default]
      nodeType: dgx
      duration: 1d2h
  - run: 2
  - advance: 90m
  - snapshot: mid
  - expect:
      running: [a1]
      pending: []
      workloads:
        a1: {status: Running, project: team-a, pods: 3, runningPods: 2, preemptions: 0, gpu: 0.5, nodes: [big]}
      queues:
        team-a: {pool: h100, deserved: 2.5, fairShare: 3, allocated: 1, requested: 1.5}
        research: {}
      cluster: {gpus: 8, allocatedGpus: 0.5}
  - nodeDown: big
  - nodeUp: big
  - fail: a1
  - delete: a1
  - complete: a1
`)
	sc, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	s := func(v string) *string { return &v }
	want := &Scenario{
		Path: path, Name: "all-fields", Description: "every field set",
		Config:    Config{Placement: "spread", Cycle: 30 * time.Second},
		NodePools: []string{"a100", "default", "h100"},
		TimeBased: map[string]fairshare.TimeBased{
			"a100": {HalfLife: time.Hour, K: 0.5},
			"h100": {HalfLife: 30 * time.Minute, K: 1}, // k defaults to 1
		},
		Nodes: []Node{{Name: "big", Pool: "h100", GPUs: 8, GPUMemoryGiB: 141, CPU: 128, MemoryGiB: 2048,
			Labels: map[string]string{"run.ai/type": "dgx"}, Line: 9}},
		Departments: []Department{{Name: "research", Line: 11, Quota: []PoolQuota{
			{Pool: "h100", Quota: Quota{GPU: 8, CPU: -1, MemoryGiB: -1, OverQuotaWeight: 1, Limit: -1, OverQuota: true}},
			{Pool: "a100", Quota: Quota{GPU: 2, CPU: -1, MemoryGiB: -1, OverQuotaWeight: 1, Limit: -1, OverQuota: true}},
		}}},
		Projects: []Project{{Name: "team-a", Department: "research", Line: 13, Quota: []PoolQuota{
			{Pool: "h100", Quota: Quota{GPU: 2.5, CPU: 10, MemoryGiB: 100, OverQuotaWeight: 0, Limit: 4}},
		}}},
		Actions: []Action{
			{Line: 18, Kind: ActionSubmit, Submits: []Submit{{Name: "a1", Project: "team-a", Type: "inference",
				Priority: "interactive-preemptible", GPUMemoryGiB: 20, CPU: 0.5, MemoryGiB: 2, Pods: 3, MinPods: 2,
				Pools: []string{"h100", "default"}, NodeType: "dgx", Duration: 26 * time.Hour, Line: 18}}},
			{Line: 31, Kind: ActionRun, Run: 2},
			{Line: 32, Kind: ActionAdvance, Advance: 90 * time.Minute},
			{Line: 33, Kind: ActionSnapshot, Snapshot: "mid"},
			{Line: 34, Kind: ActionExpect, Expect: &Expect{Line: 34,
				Running: []string{"a1"}, Pending: []string{},
				Workloads: []WorkloadExpect{{Name: "a1", Status: s("Running"), Project: s("team-a"), Pods: i(3),
					RunningPods: i(2), Preemptions: i(0), GPU: f(0.5), Nodes: &[]string{"big"}, Line: 38}},
				Queues: []QueueExpect{
					{Name: "team-a", Pool: "h100", Deserved: f(2.5), FairShare: f(3), Allocated: f(1), Requested: f(1.5), Line: 40},
					{Name: "research", Pool: "default", Line: 41},
				},
				Cluster: &ClusterExpect{GPUs: f(8), AllocatedGPUs: f(0.5)},
			}},
			{Line: 43, Kind: ActionNodeDown, Target: "big"},
			{Line: 44, Kind: ActionNodeUp, Target: "big"},
			{Line: 45, Kind: ActionFail, Target: "a1"},
			{Line: 46, Kind: ActionDelete, Target: "a1"},
			{Line: 47, Kind: ActionComplete, Target: "a1"},
		},
	}
	if diff := cmp.Diff(want, sc); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}
}

// Anchors and aliases are plain YAML, so they must work like the text they stand for.
func TestLoadAliases(t *testing.T) {
	sc := mustLoad(t, `name: alias
description: ""
nodes:
  - &dgx {name: a, gpus: 8}
projects:
  - {name: p, quota: {default: &q {gpu: 2}}}
  - {name: r, quota: {default: *q}}
actions:
  - submit: &job {name: j, project: p, gpu: 1}
  - run: 1
`)
	if got := sc.Projects[1].Quota[0].Quota.GPU; got != 2 {
		t.Errorf("aliased quota gpu = %v, want 2", got)
	}
	if sc.Description != "" {
		t.Errorf("Description = %q, want empty", sc.Description)
	}
}

func TestLoadCountExpansion(t *testing.T) {
	sc := mustLoad(t, `name: count
nodes:
  - {name: dgx, gpus: 8, count: 3, labels: {zone: a}}
  - {name: solo, count: 1}
projects:
  - {name: p}
actions:
  - submit: {name: job, count: 3, project: p, gpu: 1}
  - complete: job-2
`)
	var nodes []string
	for _, n := range sc.Nodes {
		nodes = append(nodes, n.Name)
	}
	if diff := cmp.Diff([]string{"dgx-1", "dgx-2", "dgx-3", "solo-1"}, nodes); diff != "" {
		t.Errorf("node names (-want +got):\n%s", diff)
	}
	sc.Nodes[0].Labels["zone"] = "changed" // each node must own its labels
	if got := sc.Nodes[1].Labels["zone"]; got != "a" {
		t.Errorf("dgx-2 zone = %q after changing dgx-1's; nodes share a map", got)
	}
	var subs []string
	for _, s := range sc.Actions[0].Submits {
		subs = append(subs, s.Name)
		if s.GPU != 1 || s.Project != "p" || s.Line != 8 {
			t.Errorf("%s = %+v, want a copy of the submit", s.Name, s)
		}
	}
	if diff := cmp.Diff([]string{"job-1", "job-2", "job-3"}, subs); diff != "" {
		t.Errorf("submit names (-want +got):\n%s", diff)
	}
}

func TestLoadReplay(t *testing.T) {
	sc, err := Load("testdata/replay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Replay{File: filepath.Join("testdata", "small-trace.csv"), Projects: "declared",
		OverQuota: true, Pool: "a100", Type: "training", Line: 13}
	if diff := cmp.Diff(want, sc.Actions[0].Replay); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a100", "default"}, sc.NodePools); diff != "" {
		t.Errorf("node pools keep the file's order (-want +got):\n%s", diff)
	}
}

func TestActionKindString(t *testing.T) {
	for kind, want := range map[ActionKind]string{ActionSubmit: "submit", ActionNodeDown: "nodeDown",
		ActionExpect: "expect", 0: "ActionKind(0)", 99: "ActionKind(99)"} {
		if got := kind.String(); got != want {
			t.Errorf("ActionKind(%d).String() = %q, want %q", int(kind), got, want)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "absent.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(absent) = %v, want an error matching os.ErrNotExist", err)
	}
}

// base declares a small cluster; its actions list starts on line 7.
const base = `name: t
nodes:
  - {name: node-1, gpus: 2}
projects:
  - {name: team-a, quota: {default: {gpu: 1}}}
actions:
`

func withActions(lines ...string) string {
	return base + strings.Join(lines, "\n") + "\n"
}

func TestLoadErrors(t *testing.T) {
	cases := map[string]struct {
		file   string
		line   int
		phrase string
	}{
		"an empty file is rejected":               {"", 1, "empty file"},
		"a YAML syntax error keeps its line":      {"name: t\nnodes: []\ndescription: a: b\n", 3, "YAML: mapping values are not allowed"},
		"two YAML documents are rejected":         {"name: t\n---\nname: u\n", 3, "second YAML document"},
		"the top level must be a mapping":         {"- a\n", 1, "top level: want a mapping"},
		"an unknown top-level field is named":     {"name: t\nnodepools: []\n", 2, `unknown field "nodepools"`},
		"a missing name is reported":              {"description: x\n", 1, "top level: name is required"},
		"an upper-case name is rejected":          {"name: Big\n", 1, `name "Big": want lower-case`},
		"a duplicate key is rejected":             {"name: t\nname: u\n", 2, `duplicate key "name"`},
		"a merge key is rejected":                 {"name: t\nconfig:\n  <<: {cycle: 2s}\n", 3, "merge keys"},
		"an unknown placement is rejected":        {"name: t\nconfig: {placement: random}\n", 2, `"random" is not one of binpack, spread`},
		"a zero cycle is rejected":                {"name: t\nconfig: {cycle: 0s}\n", 2, "config: cycle: must be more than 0"},
		"a bad cycle is rejected":                 {"name: t\nconfig: {cycle: soon}\n", 2, `config: cycle: invalid duration "soon"`},
		"a duplicate node pool is rejected":       {"name: t\nnodePools:\n  - name: a\n  - name: a\n", 4, `nodePools[1]: duplicate node pool "a"`},
		"time-based fair share needs a half-life": {"name: t\nnodePools:\n  - name: a\n    timeBasedFairShare: {k: 1}\n", 4, "nodePools[0]: timeBasedFairShare: halfLife is required"},
		"a time-based k below 0 is rejected":      {"name: t\nnodePools:\n  - name: a\n    timeBasedFairShare: {halfLife: 1h, k: -1}\n", 4, "k: must be at least 0"},
		"a zero half-life is rejected":            {"name: t\nnodePools:\n  - name: a\n    timeBasedFairShare: {halfLife: 0s}\n", 4, "halfLife: must be more than 0"},
		"an unknown time-based field is rejected": {"name: t\nnodePools:\n  - name: a\n    timeBasedFairShare: {decay: 1h}\n", 4, `unknown field "decay"`},
		"a duplicate node name is rejected":       {"name: t\nnodes:\n  - name: node-1\n  - name: node-1\n", 4, `nodes[1]: duplicate node name "node-1"`},
		"expanded node names collide":             {"name: t\nnodes:\n  - {name: n, count: 2}\n  - {name: n-2}\n", 4, `nodes[1]: duplicate node name "n-2"`},
		"a node in an undeclared pool":            {"name: t\nnodes:\n  - {name: n, pool: h100}\n", 3, `nodes[0]: node pool "h100" is not declared`},
		"a node with fractional gpus":             {"name: t\nnodes:\n  - {name: n, gpus: 1.5}\n", 3, "nodes[0]: gpus: want a whole number"},
		"a node with negative gpus":               {"name: t\nnodes:\n  - {name: n, gpus: -1}\n", 3, "gpus: must be at least 0"},
		"a node count of zero":                    {"name: t\nnodes:\n  - {name: n, count: 0}\n", 3, "count: must be at least 1"},
		"a node with an unknown field":            {"name: t\nnodes:\n  - {name: n, gpu: 1}\n", 3, `nodes[0]: unknown field "gpu" (want one of name, pool, gpus,`},
		"nodes must be a list":                    {"name: t\nnodes: {name: n}\n", 2, "nodes: want a list, got a mapping"},
		"a duplicate department is rejected":      {"name: t\ndepartments:\n  - name: d\n  - name: d\n", 4, `departments[1]: duplicate department name "d"`},
		"an undeclared department is rejected":    {"name: t\nprojects:\n  - {name: p, department: d}\n", 3, `projects[0]: department "d" is not declared`},
		"a duplicate project is rejected":         {"name: t\nprojects:\n  - name: p\n  - name: p\n", 4, `projects[1]: duplicate project name "p"`},
		"a project named like a department":       {"name: t\ndepartments: [{name: d}]\nprojects: [{name: d}]\n", 3, `project name "d" is already a department's`},
		"a quota in an undeclared pool":           {"name: t\nprojects:\n  - name: p\n    quota:\n      h100: {gpu: 1}\n", 5, `quota: node pool "h100" is not declared`},
		"a quota with an unknown field":           {"name: t\nprojects:\n  - name: p\n    quota:\n      default: {gpus: 1}\n", 5, `projects[0]: quota: default: unknown field "gpus"`},
		"a quota cpu below -1":                    {"name: t\nprojects:\n  - name: p\n    quota: {default: {cpu: -2}}\n", 4, "cpu: want -1 (unlimited)"},
		"a non-boolean overQuota":                 {"name: t\nprojects:\n  - name: p\n    quota: {default: {overQuota: maybe}}\n", 4, "overQuota: want true or false"},

		"an action with two keys":     {withActions("  - {run: 1, advance: 1s}"), 7, "actions[0]: want a mapping with a single key"},
		"an action that is a string":  {withActions("  - run"), 7, `actions[0]: want a mapping with a single key, such as {run: 1}, got "run"`},
		"an unknown action":           {withActions("  - sleep: 1s"), 7, `actions[0]: unknown action "sleep"`},
		"a run of zero cycles":        {withActions("  - run: 0"), 7, "run: want at least 1 cycle"},
		"a run of a mapping":          {withActions("  - run: {}"), 7, "run: want a whole number, got a mapping"},
		"an advance without a unit":   {withActions("  - advance: 30"), 7, `advance: invalid duration "30"`},
		"a negative advance":          {withActions("  - advance: -1m"), 7, "advance: must be more than 0"},
		"a submit with unknown field": {withActions("  - submit: {name: a1, project: team-a, gpus: 1}"), 7, `submit: unknown field "gpus" (want one of name, count, project,`},
		"a submit without a name":     {withActions("  - submit: {project: team-a}"), 7, "submit: name is required"},
		"a submit without a project":  {withActions("  - submit: {name: a1}"), 7, "submit a1: project is required"},
		"an undeclared project":       {withActions("  - submit: {name: a1, project: team-z}"), 7, `submit a1: project "team-z" is not declared`},
		"an unknown workload type":    {withActions("  - submit: {name: a1, project: team-a, type: batch}"), 7, `type: "batch" is not one of workspace, training, inference`},
		"an unknown priority":         {withActions("  - submit: {name: a1, project: team-a, priority: high}"), 7, `priority: "high" is not one of`},
		"gpu and gpuMemoryGiB both":   {withActions("  - submit: {name: a1, project: team-a, gpu: 1, gpuMemoryGiB: 20}"), 7, "give gpu or gpuMemoryGiB, not both"},
		"a negative gpu":              {withActions("  - submit: {name: a1, project: team-a, gpu: -0.5}"), 7, "gpu: must be at least 0"},
		"a fractional gpu over one":   {withActions("  - submit: {name: a1, project: team-a, gpu: 1.5}"), 7, "more than 1 GPU must be a whole number"},
		"a gpu that is not a number":  {withActions("  - submit: {name: a1, project: team-a, gpu: one}"), 7, `gpu: want a number, got "one"`},
		"zero pods":                   {withActions("  - submit: {name: a1, project: team-a, pods: 0}"), 7, "pods: must be at least 1"},
		"minPods over pods":           {withActions("  - submit: {name: a1, project: team-a, pods: 2, minPods: 3}"), 7, "minPods (3) is more than pods (2)"},
		"minPods of zero":             {withActions("  - submit: {name: a1, project: team-a, minPods: 0}"), 7, "minPods: must be at least 1"},
		"a submit to an unknown pool": {withActions("  - submit: {name: a1, project: team-a, pool: [default, h100]}"), 7, `node pool "h100" is not declared`},
		"a zero duration":             {withActions("  - submit: {name: a1, project: team-a, duration: 0s}"), 7, "duration: must be more than 0"},
		"a duplicate workload name": {withActions(
			"  - submit: {name: a1, project: team-a}",
			"  - submit: {name: a1, project: team-a}"), 8, `duplicate workload name "a1" (first submitted on line 7)`},
		"expanded workload names collide": {withActions(
			"  - submit: {name: a, count: 2, project: team-a}",
			"  - submit: {name: a-2, project: team-a}"), 8, `duplicate workload name "a-2"`},
		"completing an unknown workload": {withActions("  - complete: a1"), 7, `complete: workload "a1" is not submitted earlier`},
		"deleting before submitting": {withActions(
			"  - delete: a1",
			"  - submit: {name: a1, project: team-a}"), 7, `delete: workload "a1" is not submitted earlier`},
		"an unknown node goes down":        {withActions("  - nodeDown: node-9"), 7, `nodeDown: node "node-9" is not declared`},
		"a target that is a list":          {withActions("  - fail: [a1]"), 7, "fail: want a name or text, got a list"},
		"a duplicate snapshot":             {withActions("  - snapshot: s", "  - snapshot: s"), 8, `duplicate snapshot name "s"`},
		"an expect with an unknown field":  {withActions("  - expect: {runing: [a1]}"), 7, `expect: unknown field "runing"`},
		"an expect that is null":           {withActions("  - expect:"), 7, "expect: want a mapping of checks"},
		"an expect on an unknown workload": {withActions("  - expect:", "      pending: [a1]"), 8, `expect: pending: workload "a1" is not submitted earlier`},
		"a workload in two status lists": {withActions(
			"  - submit: {name: a1, project: team-a}",
			"  - expect: {running: [a1], pending: [a1]}"), 8, `"a1" is listed in both running and pending`},
		"an unknown expected status": {withActions(
			"  - submit: {name: a1, project: team-a}",
			"  - expect:",
			"      workloads:",
			"        a1: {status: Done}"), 10, `status: "Done" is not one of Pending, Running, Completed, Failed`},
		"an expected node that does not exist": {withActions(
			"  - submit: {name: a1, project: team-a}",
			"  - expect: {workloads: {a1: {nodes: [node-2]}}}"), 8, `nodes: node "node-2" is not declared`},
		"an expected project that does not exist": {withActions(
			"  - submit: {name: a1, project: team-a}",
			"  - expect: {workloads: {a1: {project: team-b}}}"), 8, `project: "team-b" is not a declared project`},
		"an expected queue that does not exist": {withActions(
			"  - expect:",
			"      queues:",
			"        team-b: {allocated: 1}"), 9, `expect: queues: "team-b" is not a declared project or department`},
		"an expected queue in an unknown pool": {withActions(
			"  - expect: {queues: {team-a: {pool: h100}}}"), 7, `node pool "h100" is not declared`},
		"a cluster expectation with a typo": {withActions(
			"  - expect: {cluster: {allocatedGPUs: 1}}"), 7, `expect: cluster: unknown field "allocatedGPUs" (want one of gpus, allocatedGpus)`},
		"a node with no GPU memory":      {"name: t\nnodes:\n  - {name: n, gpuMemoryGiB: 0}\n", 3, "gpuMemoryGiB: must be more than 0"},
		"a description that is a list":   {"name: t\ndescription: [a]\n", 2, "description: want a name or text, got a list"},
		"an empty node name":             {"name: t\nnodes:\n  - name: ''\n", 3, "nodes[0]: name: must not be empty"},
		"an advance with no value":       {withActions("  - advance:"), 7, "advance: want a duration"},
		"a pool listed twice":            {withActions("  - submit: {name: a1, project: team-a, pool: [default, default]}"), 7, `node pool "default" is listed twice`},
		"an empty pool list":             {withActions("  - submit: {name: a1, project: team-a, pool: []}"), 7, "pool: empty list"},
		"a zero gpuMemoryGiB request":    {withActions("  - submit: {name: a1, project: team-a, gpuMemoryGiB: 0}"), 7, "gpuMemoryGiB: must be more than 0"},
		"a replay without a file":        {withActions("  - replay: {projects: auto}"), 7, "replay: file is required"},
		"a replay of a missing file":     {withActions("  - replay: {file: nowhere.csv}"), 7, `replay: file "nowhere.csv": no such file`},
		"a replay with unknown projects": {withActions("  - replay: {file: x.csv, projects: some}"), 7, `projects: "some" is not one of auto, declared`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := writeFile(t, "x.yaml", tc.file)
			_, err := Load(path)
			assertFileError(t, err, path, tc.line, tc.phrase)
		})
	}
}

// assertFileError checks that err is a *FileError reading "FILE:LINE: …phrase…".
func assertFileError(t *testing.T, err error, file string, line int, phrase string) {
	t.Helper()
	var fe *FileError
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v (%T), want a *FileError", err, err)
	}
	prefix := fmt.Sprintf("%s:%d: ", file, line)
	if msg := err.Error(); !strings.HasPrefix(msg, prefix) || !strings.Contains(msg, phrase) {
		t.Errorf("error = %q\nwant prefix %q and phrase %q", msg, prefix, phrase)
	}
	if fe.File != file || fe.Line != line {
		t.Errorf("FileError{File: %q, Line: %d}, want {%q, %d}", fe.File, fe.Line, file, line)
	}
}

// Checks that depend on a replay: its trace is read at load time, and after
// it, names may come from the trace.
func TestLoadReplayRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("good.csv", "job_id,submit_seconds,duration_seconds,gpus,queue\nj1,0,10,1,team-a\nj2,5,10,1,team-b\n")
	write("bad.csv", "job_id,submit_seconds,duration_seconds,gpus,queue\nj1,zero,10,1,team-a\n")

	auto := write("auto.yaml", withActions(
		"  - replay: {file: good.csv}",
		"  - complete: j1",
		"  - expect: {running: [j2], queues: {team-b: {allocated: 1}}}"))
	if _, err := Load(auto); err != nil {
		t.Errorf("names from an auto replay: %v", err)
	}

	declared := write("declared.yaml", withActions("  - replay: {file: good.csv, projects: declared}"))
	_, err := Load(declared)
	assertFileError(t, err, declared, 7, `replay: queue "team-b" (`+filepath.Join(dir, "good.csv")+`:3) is not a declared project`)

	if err := os.Mkdir(filepath.Join(dir, "dir.csv"), 0o755); err != nil {
		t.Fatal(err)
	}
	dirTrace := write("dir.yaml", withActions("  - replay: {file: dir.csv}"))
	_, err = Load(dirTrace)
	assertFileError(t, err, dirTrace, 7, `replay: file "dir.csv": `)

	badTrace := write("bad.yaml", withActions("  - replay: {file: bad.csv}"))
	_, err = Load(badTrace)
	assertFileError(t, err, filepath.Join(dir, "bad.csv"), 2, `submit_seconds: want a number of seconds, got "zero"`)

	unknownSubmitProject := write("proj.yaml", withActions(
		"  - replay: {file: good.csv}",
		"  - submit: {name: x, project: team-b}"))
	_, err = Load(unknownSubmitProject)
	assertFileError(t, err, unknownSubmitProject, 8, `submit x: project "team-b" is not declared`)
}
