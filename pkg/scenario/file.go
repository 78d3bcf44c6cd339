package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/runwayhq/runway/pkg/fairshare"
)

// Scenario is a loaded scenario file. Every list keeps the order of the file.
type Scenario struct {
	Path, Name, Description string
	Config                  Config
	NodePools               []string // "default" first unless the file places it
	// TimeBased holds the pools that set timeBasedFairShare (SCHEDULING.md
	// §2), by name; nil when none does.
	TimeBased   map[string]fairshare.TimeBased
	Nodes       []Node // count expanded
	Departments []Department
	Projects    []Project
	Actions     []Action
}

// Config holds the scheduler settings of a scenario.
type Config struct {
	Placement string        // binpack (default) | spread
	Cycle     time.Duration // virtual time per scheduling cycle (default 1s)
}

// Node is one machine; a node with count N in the file is N Nodes.
type Node struct {
	Name, Pool                   string
	GPUs                         int
	GPUMemoryGiB, CPU, MemoryGiB float64
	Labels                       map[string]string // nil when none; each Node owns its map
	Line                         int
}

// Quota is what a project or department deserves in one node pool.
type Quota struct {
	GPU, CPU, MemoryGiB, OverQuotaWeight, Limit float64 // -1 = unlimited for CPU, MemoryGiB, Limit
	OverQuota                                   bool
}

// PoolQuota is a Quota for a named node pool.
type PoolQuota struct {
	Pool  string
	Quota Quota
}

// Department groups projects; a project without one belongs to "default".
type Department struct {
	Name  string
	Quota []PoolQuota
	Line  int
}

// Project is a queue that workloads are submitted to.
type Project struct {
	Name, Department string // Department "" when the file names none
	Quota            []PoolQuota
	Line             int
}

// ActionKind says which field of an Action is meaningful.
type ActionKind int

// The action kinds, one per key of an action in the file. They start at 1 so
// that a zero Action is recognisably not filled in.
const (
	ActionSubmit ActionKind = iota + 1
	ActionRun
	ActionAdvance
	ActionComplete
	ActionFail
	ActionDelete
	ActionNodeDown
	ActionNodeUp
	ActionReplay
	ActionSnapshot
	ActionExpect
)

// actionKeys are the file's names of the action kinds, indexed by kind-1.
var actionKeys = []string{"submit", "run", "advance", "complete", "fail", "delete",
	"nodeDown", "nodeUp", "replay", "snapshot", "expect"}

// String returns the action's key in the file, such as "nodeDown".
func (k ActionKind) String() string {
	if k < ActionSubmit || k > ActionExpect {
		return "ActionKind(" + strconv.Itoa(int(k)) + ")"
	}
	return actionKeys[k-1]
}

// Action is one step of the timeline. Kind says which other field is set:
// Submits (Submit), Run (Run; 0 = until nothing changes), Advance (Advance),
// Target (Complete, Fail, Delete: a workload; NodeDown, NodeUp: a node),
// Replay, Snapshot (its name) or Expect.
type Action struct {
	Line     int
	Kind     ActionKind
	Submits  []Submit // count expanded, in order
	Run      int
	Advance  time.Duration
	Target   string
	Replay   *Replay
	Snapshot string
	Expect   *Expect
}

// Submit is one workload submission.
type Submit struct {
	Name, Project, Type, Priority     string // Priority "" = the type's default
	GPU, GPUMemoryGiB, CPU, MemoryGiB float64
	Pods, MinPods                     int
	Pools                             []string      // in order of preference
	NodeType                          string        // "" = any node
	Duration                          time.Duration // 0 = runs until told otherwise
	Line                              int
}

// Replay submits the jobs of a trace at their own times.
type Replay struct {
	File      string // resolved against the scenario file's directory
	Projects  string // auto | declared
	OverQuota bool
	Pool      string
	Type      string
	Line      int
}

// Expect is a set of checks on the state at one point of the timeline.
type Expect struct {
	Line                                int
	Running, Pending, Completed, Failed []string
	Workloads                           []WorkloadExpect
	Queues                              []QueueExpect
	Cluster                             *ClusterExpect
}

// WorkloadExpect checks one workload; nil fields are not checked.
type WorkloadExpect struct {
	Name                           string
	Status, Project                *string
	Pods, RunningPods, Preemptions *int
	GPU                            *float64
	Nodes                          *[]string
	Line                           int
}

// QueueExpect checks a project or department in one pool; nil fields are not checked.
type QueueExpect struct {
	Name, Pool                                string
	Deserved, FairShare, Allocated, Requested *float64
	Line                                      int
}

// ClusterExpect checks cluster totals; nil fields are not checked.
type ClusterExpect struct {
	GPUs, AllocatedGPUs *float64
}

// FileError is a problem in a scenario or trace file, located by line.
type FileError struct {
	File string
	Line int
	Msg  string
}

func (e *FileError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Load reads and checks a scenario file. Problems in the file are returned
// as *FileError; a file that cannot be read gives the os error.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	root, err := parseYAML(path, data)
	if err != nil {
		return nil, err
	}
	p := &parser{file: path, dir: filepath.Dir(path),
		pools: map[string]bool{}, nodes: map[string]bool{}, departments: map[string]bool{},
		projects: map[string]bool{}, submitted: map[string]int{}, snapshots: map[string]bool{}}
	sc := p.scenario(root)
	if p.err != nil {
		return nil, p.err
	}
	return sc, nil
}

var yamlLine = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)

// parseYAML returns the root node of the file's single document.
func parseYAML(path string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &FileError{File: path, Line: 1, Msg: "empty file"}
		}
		return nil, yamlError(path, err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &FileError{File: path, Line: firstLine(&next), Msg: "a second YAML document; want one per file"}
	case !errors.Is(err, io.EOF):
		return nil, yamlError(path, err)
	}
	return doc.Content[0], nil
}

func firstLine(doc *yaml.Node) int {
	if len(doc.Content) > 0 {
		return doc.Content[0].Line
	}
	return doc.Line
}

// yamlError turns yaml's "yaml: line N: msg" into a FileError; the few
// syntax errors that carry no line are put on line 1.
func yamlError(path string, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FileError{File: path, Line: line, Msg: "YAML: " + m[2]}
	}
	return &FileError{File: path, Line: 1, Msg: "YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

// parser walks the YAML tree. It keeps the first error only (later ones are
// often consequences of it), so the walking code reads without error checks;
// values read after an error are zero and never used.
type parser struct {
	file, dir string
	err       error

	pools, nodes, departments, projects map[string]bool
	submitted                           map[string]int // workload name -> line of its submit
	snapshots                           map[string]bool
	replayed                            bool // a replay came earlier: workloads may come from a trace
	autoProjects                        bool // an auto replay came earlier: projects may come from a trace
}

func (p *parser) fail(n *yaml.Node, format string, args ...any) {
	if p.err != nil {
		return
	}
	line := 0 // only if a caller passes an absent node, which is a bug
	if n != nil {
		line = n.Line
	}
	p.err = &FileError{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

var scenarioName = regexp.MustCompile(`^[a-z0-9-]+$`)

var topFields = []string{"name", "description", "config", "nodePools", "nodes",
	"departments", "projects", "actions"}

// scenario reads the sections in dependency order, whatever their order in
// the file, so that every reference can be checked against what it names.
func (p *parser) scenario(root *yaml.Node) *Scenario {
	f := p.fields(root, "top level", topFields...)
	sc := &Scenario{Path: p.file, Name: p.required(f, "name")}
	if p.err == nil && !scenarioName.MatchString(sc.Name) {
		p.fail(f.get("name"), "name %q: want lower-case letters, digits and '-' only", sc.Name)
	}
	if n := f.get("description"); n != nil && (n.Kind != yaml.ScalarNode || n.Value != "") { // free text may be empty
		sc.Description = p.scalar(n, "description")
	}
	sc.Config = p.config(f.get("config"))
	sc.NodePools, sc.TimeBased = p.nodePools(f.get("nodePools"))
	sc.Nodes = p.nodeList(f.get("nodes"))
	sc.Departments = p.departmentList(f.get("departments"))
	sc.Projects = p.projectList(f.get("projects"))
	sc.Actions = p.actionList(f.get("actions"))
	return sc
}

func (p *parser) config(n *yaml.Node) Config {
	c := Config{Placement: "binpack", Cycle: time.Second}
	f := p.fields(n, "config", "placement", "cycle")
	c.Placement = p.optOneOf(f, "placement", c.Placement, "binpack", "spread")
	c.Cycle = p.optDuration(f, "cycle", c.Cycle)
	return c
}

func (p *parser) nodePools(n *yaml.Node) ([]string, map[string]fairshare.TimeBased) {
	var pools []string
	var timeBased map[string]fairshare.TimeBased
	for i, item := range p.items(n, "nodePools") {
		f := p.fields(item, fmt.Sprintf("nodePools[%d]", i), "name", "timeBasedFairShare")
		name := p.required(f, "name")
		if p.pools[name] {
			p.fail(f.get("name"), "%s: duplicate node pool %q", f.what, name)
		}
		p.pools[name] = true
		pools = append(pools, name)
		if tb := f.get("timeBasedFairShare"); tb != nil {
			g := p.fields(tb, f.what+": timeBasedFairShare", "halfLife", "k")
			if timeBased == nil {
				timeBased = map[string]fairshare.TimeBased{}
			}
			halfLife := p.optDuration(g, "halfLife", 0)
			if halfLife == 0 {
				p.fail(tb, "%s: halfLife is required", g.what)
			}
			timeBased[name] = fairshare.TimeBased{HalfLife: halfLife, K: p.optFloat(g, "k", 1, 0)}
		}
	}
	if !p.pools["default"] { // always exists; first unless the file places it
		p.pools["default"] = true
		pools = append([]string{"default"}, pools...)
	}
	return pools, timeBased
}

var nodeFields = []string{"name", "pool", "gpus", "gpuMemoryGiB", "cpu", "memoryGiB", "labels", "count"}

func (p *parser) nodeList(n *yaml.Node) []Node {
	var nodes []Node
	for i, item := range p.items(n, "nodes") {
		f := p.fields(item, fmt.Sprintf("nodes[%d]", i), nodeFields...)
		base := Node{Name: p.required(f, "name"), Pool: p.optPool(f, "pool"),
			GPUs:         p.optInt(f, "gpus", 0, 0),
			GPUMemoryGiB: p.optFloat(f, "gpuMemoryGiB", 80, 0),
			CPU:          p.optFloat(f, "cpu", 64, 0),
			MemoryGiB:    p.optFloat(f, "memoryGiB", 512, 0),
			Labels:       p.labels(f), Line: item.Line}
		if base.GPUMemoryGiB == 0 { // fractions are measured against it
			p.fail(f.get("gpuMemoryGiB"), "%s: gpuMemoryGiB: must be more than 0", f.what)
		}
		for _, name := range p.expand(f, base.Name) {
			if p.nodes[name] {
				p.fail(f.get("name"), "%s: duplicate node name %q", f.what, name)
			}
			p.nodes[name] = true
			node := base
			node.Name, node.Labels = name, maps.Clone(base.Labels)
			nodes = append(nodes, node)
		}
	}
	return nodes
}

func (p *parser) labels(f fields) map[string]string {
	n := f.get("labels")
	if n == nil {
		return nil
	}
	labels := map[string]string{}
	for _, kv := range p.pairs(n, f.what+": labels") {
		labels[kv.key.Value] = p.scalar(kv.val, f.what+": labels: "+kv.key.Value)
	}
	return labels
}

// expand applies count: N copies named NAME-1 … NAME-N, or NAME alone.
func (p *parser) expand(f fields, name string) []string {
	n := f.get("count")
	if n == nil {
		return []string{name}
	}
	count := p.whole(n, f.what+": count")
	if count < 1 {
		p.fail(n, "%s: count: must be at least 1, got %d", f.what, count)
	}
	names := make([]string, 0, max(count, 0))
	for i := 1; i <= count; i++ {
		names = append(names, fmt.Sprintf("%s-%d", name, i))
	}
	return names
}

func (p *parser) departmentList(n *yaml.Node) []Department {
	var depts []Department
	for i, item := range p.items(n, "departments") {
		f := p.fields(item, fmt.Sprintf("departments[%d]", i), "name", "quota")
		d := Department{Name: p.required(f, "name"), Line: item.Line}
		if p.departments[d.Name] {
			p.fail(f.get("name"), "%s: duplicate department name %q", f.what, d.Name)
		}
		p.departments[d.Name] = true
		d.Quota = p.quotas(f)
		depts = append(depts, d)
	}
	return depts
}

func (p *parser) projectList(n *yaml.Node) []Project {
	var projects []Project
	for i, item := range p.items(n, "projects") {
		f := p.fields(item, fmt.Sprintf("projects[%d]", i), "name", "department", "quota")
		pr := Project{Name: p.required(f, "name"), Line: item.Line}
		p.checkProjectName(f, pr.Name)
		p.projects[pr.Name] = true
		if d := f.get("department"); d != nil {
			pr.Department = p.scalar(d, f.what+": department")
			if pr.Department != "default" && !p.departments[pr.Department] {
				p.fail(d, "%s: department %q is not declared", f.what, pr.Department)
			}
		}
		pr.Quota = p.quotas(f)
		projects = append(projects, pr)
	}
	return projects
}

// checkProjectName keeps project and department names apart: the runner
// reports both kinds of queue under their names in one map.
func (p *parser) checkProjectName(f fields, name string) {
	switch {
	case p.projects[name]:
		p.fail(f.get("name"), "%s: duplicate project name %q", f.what, name)
	case p.departments[name] || name == "default":
		p.fail(f.get("name"), "%s: project name %q is already a department's", f.what, name)
	}
}

var quotaFields = []string{"gpu", "cpu", "memoryGiB", "overQuotaWeight", "overQuota", "limit"}

// quotas reads a quota block: node pool -> quota, in file order.
func (p *parser) quotas(owner fields) []PoolQuota {
	n := owner.get("quota")
	if n == nil {
		return nil
	}
	var out []PoolQuota
	for _, kv := range p.pairs(n, owner.what+": quota") {
		pool := kv.key.Value
		if !p.pools[pool] {
			p.fail(kv.key, "%s: quota: node pool %q is not declared", owner.what, pool)
		}
		f := p.fields(kv.val, owner.what+": quota: "+pool, quotaFields...)
		out = append(out, PoolQuota{Pool: pool, Quota: Quota{
			GPU:             p.optFloat(f, "gpu", 0, 0),
			CPU:             p.optUnlimited(f, "cpu"),
			MemoryGiB:       p.optUnlimited(f, "memoryGiB"),
			OverQuotaWeight: p.optFloat(f, "overQuotaWeight", 1, 0),
			OverQuota:       p.optBool(f, "overQuota", true),
			Limit:           p.optUnlimited(f, "limit"),
		}})
	}
	return out
}

func (p *parser) actionList(n *yaml.Node) []Action {
	var actions []Action
	for i, item := range p.items(n, "actions") {
		what := fmt.Sprintf("actions[%d]", i)
		if item.Kind != yaml.MappingNode || len(item.Content) != 2 {
			p.fail(item, "%s: want a mapping with a single key, such as {run: 1}, got %s", what, describe(item))
			continue
		}
		key, val := item.Content[0], resolve(item.Content[1])
		kind := ActionKind(slices.Index(actionKeys, key.Value) + 1)
		if kind == 0 {
			p.fail(key, "%s: unknown action %q (want one of %s)", what, key.Value, strings.Join(actionKeys, ", "))
			continue
		}
		a := Action{Line: item.Line, Kind: kind}
		p.action(&a, val)
		actions = append(actions, a)
	}
	return actions
}

func (p *parser) action(a *Action, n *yaml.Node) {
	what := a.Kind.String()
	switch a.Kind {
	case ActionSubmit:
		a.Submits = p.submit(n, a.Line)
	case ActionRun:
		a.Run = p.runCycles(n)
	case ActionAdvance:
		a.Advance = p.duration(n, what)
	case ActionComplete, ActionFail, ActionDelete:
		a.Target = p.scalar(n, what)
		p.checkWorkload(n, what, a.Target)
	case ActionNodeDown, ActionNodeUp:
		a.Target = p.scalar(n, what)
		if !p.nodes[a.Target] {
			p.fail(n, "%s: node %q is not declared", what, a.Target)
		}
	case ActionReplay:
		a.Replay = p.replay(n, a.Line)
	case ActionSnapshot:
		a.Snapshot = p.scalar(n, what)
		if p.snapshots[a.Snapshot] { // the output tells snapshots apart by name
			p.fail(n, "snapshot: duplicate snapshot name %q", a.Snapshot)
		}
		p.snapshots[a.Snapshot] = true
	case ActionExpect:
		a.Expect = p.expect(n, a.Line)
	}
}

// runCycles reads run: N; a run with no value runs until nothing changes (0).
func (p *parser) runCycles(n *yaml.Node) int {
	if isNull(n) {
		return 0
	}
	cycles := p.whole(n, "run")
	if cycles < 1 {
		p.fail(n, "run: want at least 1 cycle, got %d (leave the value out to run until nothing changes)", cycles)
	}
	return cycles
}

// checkWorkload rejects a workload name that no earlier submit introduced;
// after a replay, names may come from the trace and are left to the runner.
func (p *parser) checkWorkload(n *yaml.Node, what, name string) {
	if _, ok := p.submitted[name]; !ok && !p.replayed {
		p.fail(n, "%s: workload %q is not submitted earlier in the file", what, name)
	}
}

var submitFields = []string{"name", "count", "project", "type", "priority", "gpu", "gpuMemoryGiB",
	"cpu", "memoryGiB", "pods", "minPods", "pool", "nodeType", "duration"}

var (
	workloadTypes = []string{"workspace", "training", "inference"}
	priorities    = []string{"inference", "build", "interactive-preemptible", "train"}
)

func (p *parser) submit(n *yaml.Node, line int) []Submit {
	f := p.fields(n, "submit", submitFields...)
	s := Submit{Name: p.required(f, "name"), Line: line}
	f.what = "submit " + s.Name // from here on, messages name the workload
	s.Project = p.required(f, "project")
	if p.err == nil && !p.projects[s.Project] {
		p.fail(f.get("project"), "%s: project %q is not declared", f.what, s.Project)
	}
	s.Type = p.optOneOf(f, "type", "training", workloadTypes...)
	s.Priority = p.optOneOf(f, "priority", "", priorities...)
	s.GPU, s.GPUMemoryGiB = p.gpuRequest(f)
	s.CPU = p.optFloat(f, "cpu", 0, 0)
	s.MemoryGiB = p.optFloat(f, "memoryGiB", 0, 0)
	s.Pods = p.optInt(f, "pods", 1, 1)
	s.MinPods = p.optInt(f, "minPods", s.Pods, 1)
	if s.MinPods > s.Pods {
		p.fail(f.get("minPods"), "%s: minPods (%d) is more than pods (%d)", f.what, s.MinPods, s.Pods)
	}
	s.Pools = p.poolList(f)
	if t := f.get("nodeType"); t != nil {
		s.NodeType = p.scalar(t, f.what+": nodeType")
	}
	s.Duration = p.optDuration(f, "duration", 0)
	return p.expandSubmit(f, s)
}

// gpuRequest reads gpu or gpuMemoryGiB; they are two ways to ask for the
// same thing, so at most one may be given.
func (p *parser) gpuRequest(f fields) (gpu, mem float64) {
	g, m := f.get("gpu"), f.get("gpuMemoryGiB")
	if g != nil && m != nil {
		p.fail(m, "%s: give gpu or gpuMemoryGiB, not both", f.what)
	}
	gpu = p.optFloat(f, "gpu", 0, 0)
	if gpu > 1 && gpu != math.Trunc(gpu) {
		p.fail(g, "%s: gpu: more than 1 GPU must be a whole number, got %v", f.what, gpu)
	}
	mem = p.optFloat(f, "gpuMemoryGiB", 0, 0)
	if m != nil && mem == 0 {
		p.fail(m, "%s: gpuMemoryGiB: must be more than 0", f.what)
	}
	return gpu, mem
}

// poolList reads pool: one name, or a list in order of preference.
func (p *parser) poolList(f fields) []string {
	n := f.get("pool")
	if n == nil {
		return []string{"default"}
	}
	var pools []string
	if n.Kind == yaml.SequenceNode {
		pools = p.names(n, f.what+": pool")
		if len(pools) == 0 {
			p.fail(n, "%s: pool: empty list; leave pool out for the default pool", f.what)
		}
	} else {
		pools = []string{p.scalar(n, f.what+": pool")}
	}
	for i, pool := range pools {
		switch {
		case !p.pools[pool]:
			p.fail(n, "%s: node pool %q is not declared", f.what, pool)
		case slices.Contains(pools[:i], pool):
			p.fail(n, "%s: node pool %q is listed twice", f.what, pool)
		}
	}
	return pools
}

// expandSubmit applies count and registers the names, which must be unique
// over the whole file: a workload name identifies it for its lifetime.
func (p *parser) expandSubmit(f fields, s Submit) []Submit {
	var out []Submit
	for _, name := range p.expand(f, s.Name) {
		if first, dup := p.submitted[name]; dup {
			p.fail(f.get("name"), "%s: duplicate workload name %q (first submitted on line %d)", f.what, name, first)
		}
		p.submitted[name] = s.Line
		s.Name = name
		s.Pools = slices.Clone(s.Pools) // each Submit owns its slice
		out = append(out, s)
	}
	return out
}

var replayFields = []string{"file", "projects", "overQuota", "pool", "type"}

func (p *parser) replay(n *yaml.Node, line int) *Replay {
	f := p.fields(n, "replay", replayFields...)
	r := &Replay{File: p.required(f, "file"), Line: line}
	if !filepath.IsAbs(r.File) {
		r.File = filepath.Join(p.dir, r.File)
	}
	r.Projects = p.optOneOf(f, "projects", "auto", "auto", "declared")
	r.OverQuota = p.optBool(f, "overQuota", true)
	r.Pool = p.optPool(f, "pool")
	r.Type = p.optOneOf(f, "type", "training", workloadTypes...)
	if p.err == nil {
		p.checkTrace(f, r)
	}
	p.replayed = true
	p.autoProjects = p.autoProjects || r.Projects == "auto"
	return r
}

// checkTrace reads the trace now, so that a bad trace is reported when the
// scenario is loaded and not halfway through a run.
func (p *parser) checkTrace(f fields, r *Replay) {
	if _, err := os.Stat(r.File); err != nil {
		p.fail(f.get("file"), "replay: file %q: %v", f.get("file").Value, errors.Unwrap(err))
		return
	}
	jobs, err := ReadTrace(r.File)
	var fe *FileError
	switch {
	case errors.As(err, &fe):
		p.err = fe // only called without an earlier error; the trace's line says more than the replay's
		return
	case err != nil:
		p.fail(f.get("file"), "replay: file %q: %v", f.get("file").Value, err)
		return
	}
	if r.Projects != "declared" {
		return
	}
	for _, j := range jobs {
		if !p.projects[j.Queue] {
			p.fail(f.node, "replay: queue %q (%s:%d) is not a declared project, and projects is \"declared\"",
				j.Queue, r.File, j.Line)
			return
		}
	}
}

var expectFields = []string{"running", "pending", "completed", "failed", "workloads", "queues", "cluster"}

func (p *parser) expect(n *yaml.Node, line int) *Expect {
	if isNull(n) {
		p.fail(n, "expect: want a mapping of checks, got null")
	}
	f := p.fields(n, "expect", expectFields...)
	e := &Expect{Line: line}
	listed := map[string]string{} // workload -> the status list naming it
	e.Running = p.statusList(f, "running", listed)
	e.Pending = p.statusList(f, "pending", listed)
	e.Completed = p.statusList(f, "completed", listed)
	e.Failed = p.statusList(f, "failed", listed)
	e.Workloads = p.workloadExpects(f.get("workloads"))
	e.Queues = p.queueExpects(f.get("queues"))
	if c := f.get("cluster"); c != nil {
		cf := p.fields(c, "expect: cluster", "gpus", "allocatedGpus")
		e.Cluster = &ClusterExpect{GPUs: p.optFloatPtr(cf, "gpus", 0), AllocatedGPUs: p.optFloatPtr(cf, "allocatedGpus", 0)}
	}
	return e
}

// statusList reads a list of workloads expected in one status; a workload
// in two lists could never pass, so that is an error here.
func (p *parser) statusList(f fields, key string, listed map[string]string) []string {
	n := f.get(key)
	if n == nil {
		return nil
	}
	names := p.names(n, "expect: "+key)
	for i, name := range names {
		item := n.Content[i]
		p.checkWorkload(item, "expect: "+key, name)
		if other, dup := listed[name]; dup {
			p.fail(item, "expect: workload %q is listed in both %s and %s", name, other, key)
		}
		listed[name] = key
	}
	return names
}

var workloadExpectFields = []string{"status", "project", "pods", "runningPods", "preemptions", "gpu", "nodes"}

var statuses = []string{"Pending", "Running", "Completed", "Failed"}

func (p *parser) workloadExpects(n *yaml.Node) []WorkloadExpect {
	var out []WorkloadExpect
	for _, kv := range p.pairs(n, "expect: workloads") {
		w := WorkloadExpect{Name: kv.key.Value, Line: kv.key.Line}
		p.checkWorkload(kv.key, "expect: workloads", w.Name)
		f := p.fields(kv.val, "expect: workloads: "+w.Name, workloadExpectFields...)
		if f.get("status") != nil {
			w.Status = ptr(p.optOneOf(f, "status", "", statuses...))
		}
		if pr := f.get("project"); pr != nil {
			w.Project = ptr(p.scalar(pr, f.what+": project"))
			p.checkQueue(pr, f.what+": project", "project", *w.Project, p.projects)
		}
		w.Pods = p.optIntPtr(f, "pods", 1)
		w.RunningPods = p.optIntPtr(f, "runningPods", 0)
		w.Preemptions = p.optIntPtr(f, "preemptions", 0)
		w.GPU = p.optFloatPtr(f, "gpu", 0)
		w.Nodes = p.nodeNames(f)
		out = append(out, w)
	}
	return out
}

func (p *parser) nodeNames(f fields) *[]string {
	n := f.get("nodes")
	if n == nil {
		return nil
	}
	names := p.names(n, f.what+": nodes")
	for i, name := range names {
		if !p.nodes[name] {
			p.fail(n.Content[i], "%s: nodes: node %q is not declared", f.what, name)
		}
	}
	return &names
}

var queueExpectFields = []string{"pool", "deserved", "fairShare", "allocated", "requested"}

func (p *parser) queueExpects(n *yaml.Node) []QueueExpect {
	var out []QueueExpect
	for _, kv := range p.pairs(n, "expect: queues") {
		q := QueueExpect{Name: kv.key.Value, Line: kv.key.Line}
		queues := maps.Clone(p.projects)
		maps.Copy(queues, p.departments)
		queues["default"] = true
		p.checkQueue(kv.key, "expect: queues", "project or department", q.Name, queues)
		f := p.fields(kv.val, "expect: queues: "+q.Name, queueExpectFields...)
		q.Pool = p.optPool(f, "pool")
		q.Deserved = p.optFloatPtr(f, "deserved", -1) // -1 = unlimited
		q.FairShare = p.optFloatPtr(f, "fairShare", 0)
		q.Allocated = p.optFloatPtr(f, "allocated", 0)
		q.Requested = p.optFloatPtr(f, "requested", 0)
		out = append(out, q)
	}
	return out
}

// checkQueue rejects an unknown project or department name, unless an
// earlier auto replay may have created it from a trace.
func (p *parser) checkQueue(n *yaml.Node, what, noun, name string, known map[string]bool) {
	if !known[name] && !p.autoProjects {
		p.fail(n, "%s: %q is not a declared %s", what, name, noun)
	}
}

func ptr[T any](v T) *T { return &v }
