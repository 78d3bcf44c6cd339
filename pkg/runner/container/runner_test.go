package container_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/container"
	"github.com/runwayhq/runway/pkg/runner/container/podmantest"
)

// newRunner is a runner on dataDir, with its pods' directories beside it.
func newRunner(t *testing.T, host, dataDir string) *container.Runner {
	t.Helper()
	r, err := container.New(context.Background(), container.Config{Host: host, DataDir: dataDir, WorkDir: dataDir + "-pods", StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// spec is pod id ("u1.N": pod N of workload w of uid u1).
func spec(id string, cmd ...string) runner.Spec {
	pod, _ := strconv.Atoi(id[strings.LastIndex(id, ".")+1:])
	return runner.Spec{ID: id, Image: podmantest.Image, Command: cmd, Workload: "projects/team-a/workloads/w",
		Project: "team-a", WorkloadUID: "u1", Pod: pod, Env: []string{"EXTRA=y"}}
}

func waitDone(t *testing.T, p runner.Pod, within time.Duration) runner.Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Exit()
	case <-time.After(within):
		t.Fatalf("the pod did not end in %s", within)
		return runner.Exit{}
	}
}

func readLog(t *testing.T, p runner.Pod) string {
	t.Helper()
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// One engine for the package's tests: each starts its runner on a data
// directory of its own, so their containers are apart.
var engine *podmantest.Engine

func TestMain(m *testing.M) {
	os.Exit(podmantest.Main(m, &engine))
}

// The pod sees its image's root, not the host's, with the clean
// environment; its log comes from the engine; exit codes fold.
func TestStart_imageRootEnvLogsExit(t *testing.T) {
	r := newRunner(t, engine.Host, t.TempDir())
	p, err := r.Start(spec("u1.0", "sh", "-c", "ls /; echo ENV; env; echo to-stderr >&2; exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, p, time.Minute); ex.Code != 3 || ex.OOMKilled {
		t.Errorf("exit %+v, want code 3", ex)
	}
	out := readLog(t, p)
	root, env, _ := strings.Cut(out, "ENV\n")
	for _, host := range []string{"usr", "var", "home", "root", "work"} {
		if strings.Contains(root, host+"\n") {
			t.Errorf("the pod's / has %s: the host's root, not the image's:\n%s", host, root)
		}
	}
	if !strings.Contains(root, "bin\n") {
		t.Errorf("the pod's / has no bin:\n%s", root)
	}
	for _, want := range []string{"EXTRA=y", "RUNWAY_PROJECT=team-a", "RUNWAY_WORKLOAD=projects/team-a/workloads/w", "CUDA_VISIBLE_DEVICES=", "to-stderr"} {
		if !strings.Contains(env, want) {
			t.Errorf("the pod's log lacks %q:\n%s", want, out)
		}
	}
	for line := range strings.Lines(env) {
		name, _, _ := strings.Cut(line, "=")
		switch {
		case strings.HasPrefix(name, "RUNWAY_"), name == "CUDA_VISIBLE_DEVICES", name == "PATH", name == "HOME", name == "TMPDIR",
			name == "EXTRA", name == "HOSTNAME", name == "PWD", name == "SHLVL", name == "container", name == "TERM", name == "to-stderr\n":
		default:
			t.Errorf("the pod's environment has %q", strings.TrimSpace(line))
		}
	}
	p, err = r.Start(spec("u1.1", "true"))
	if err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, p, time.Minute); ex != (runner.Exit{}) {
		t.Errorf("true: exit %+v, want 0", ex)
	}
}

// A pod over its memory limit is killed by the kernel and says so.
func TestStart_memoryLimit(t *testing.T) {
	r := newRunner(t, engine.Host, t.TempDir())
	s := spec("u1.0", "sh", "-c", "echo start; x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived")
	s.MemoryBytes = 32 << 20
	p, err := r.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	ex := waitDone(t, p, 2*time.Minute)
	if !ex.OOMKilled || ex.Code == 0 {
		t.Errorf("exit %+v, want killed out of memory; log:\n%s", ex, readLog(t, p))
	}
	if strings.Contains(readLog(t, p), "survived") {
		t.Error("the pod went on past its memory limit")
	}
}

// Freeze pauses the whole container: its CPU time stands still.
func TestFreeze_pausesContainer(t *testing.T) {
	r := newRunner(t, engine.Host, t.TempDir())
	p, err := r.Start(spec("u1.0", "sh", "-c", "while :; do :; done"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	eventually(t, "the pod uses CPU", func() bool { return p.CPU() > 50*time.Millisecond })
	if u := r.Usage(p)[0]; u.CPU <= 0 || u.MemoryBytes <= 0 {
		t.Errorf("Usage of a running container = %+v, want CPU and memory", u)
	}
	p.Freeze(true)
	time.Sleep(200 * time.Millisecond)
	before := p.CPU()
	time.Sleep(time.Second)
	if after := p.CPU(); after-before > 20*time.Millisecond {
		t.Errorf("a paused pod ran %s in 1 s", after-before)
	}
	p.Freeze(false)
	eventually(t, "the unpaused pod runs again", func() bool { return p.CPU()-before > 100*time.Millisecond })
	if !p.Owns(p.Pid()) || p.Owns(os.Getpid()) {
		t.Errorf("Owns: its first process %v, the test %v", p.Owns(p.Pid()), p.Owns(os.Getpid()))
	}
}

// A runner started on the same data directory (the agent was killed)
// adopts the running container instead of starting a second, and an
// exited one gives its exit; Stop ends it; Reap ends the running ones
// that are not bound.
func TestStart_adoptsAcrossRunners(t *testing.T) {
	dir := t.TempDir()
	first := newRunner(t, engine.Host, dir)
	p, err := first.Start(spec("u1.0", "sh", "-c", "echo started; exec sleep 600"))
	if err != nil {
		t.Fatal(err)
	}
	done, err := first.Start(spec("u1.1", "sh", "-c", "echo once; exit 7"))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, time.Minute)
	unbound, err := first.Start(spec("u1.2", "sleep", "600"))
	if err != nil {
		t.Fatal(err)
	}
	older, err := first.Start(spec("u1.3", "sleep", "600"))
	if err != nil {
		t.Fatal(err)
	}
	gone, err := first.Start(spec("u1.4", "sleep", "600"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []runner.Pod{p, done, unbound, older, gone} {
		if q.Origin() != runner.Started {
			t.Errorf("a first start: origin %v, want started", q.Origin())
		}
	}
	eventually(t, "the first log line", func() bool { return strings.Contains(readLog(t, p), "started") })
	first.Close() // the agent dies: its containers stay
	// u1.4's container goes with the engine's storage while no agent runs.
	cli, err := client.New(client.WithHost(engine.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ContainerRemove(context.Background(), "runway-"+runner.Name(dir)+"-u1.4", client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	waitDone(t, gone, time.Minute)

	second := newRunner(t, engine.Host, dir)
	q, err := second.Start(spec("u1.0", "sh", "-c", "echo started; exec sleep 600"))
	if err != nil {
		t.Fatal(err)
	}
	if q.Pid() != p.Pid() || q.Origin() != runner.Adopted {
		t.Errorf("the second runner runs pid %d (origin %v), the first ran %d: started twice", q.Pid(), q.Origin(), p.Pid())
	}
	next := spec("u1.3", "sleep", "600")
	next.Revision = 1 // bound again while no agent ran
	o, err := second.Start(next)
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, older, time.Minute) // the earlier binding's container, removed
	if o.Origin() != runner.Started || o.Pid() == older.Pid() {
		t.Errorf("u1.3 bound again: origin %v, pid %d (the old one's %d); want a new start", o.Origin(), o.Pid(), older.Pid())
	}
	again := spec("u1.4", "sleep", "600")
	restarting := 0
	again.Restarting = func() { // before its new container exists
		if _, err := cli.ContainerInspect(context.Background(), "runway-"+runner.Name(dir)+"-u1.4", client.ContainerInspectOptions{}); err == nil {
			t.Error("Restarting was called once u1.4's new container existed")
		}
		restarting++
	}
	re, err := second.Start(again)
	if err != nil {
		t.Fatal(err)
	}
	if re.Origin() != runner.Restarted || restarting != 1 {
		t.Errorf("u1.4, its container gone: origin %v, Restarting called %d times; want restarted, once", re.Origin(), restarting)
	}
	for _, x := range []runner.Pod{o, re} {
		x.Kill()
	}
	eventually(t, "the adopted log", func() bool { return readLog(t, q) == "started\n" })
	d, err := second.Start(spec("u1.1", "sh", "-c", "echo once; exit 7"))
	if err != nil {
		t.Fatal(err)
	}
	if ex := waitDone(t, d, time.Minute); ex.Code != 7 || readLog(t, d) != "once\n" || d.Origin() != runner.Adopted {
		t.Errorf("the exited pod adopted: exit %+v, log %q; want 7 and one line", ex, readLog(t, d))
	}
	second.Reap(func(project, workload string, pod int) bool {
		return project == "team-a" && workload == "w" && pod != 2
	})
	select {
	case <-unbound.Done():
	case <-time.After(time.Minute):
		t.Error("Reap left an unbound pod running")
	}
	if _, err := os.Stat(d.LogPath()); err != nil {
		t.Errorf("Reap removed an ended pod's log: %v", err)
	}
	select {
	case <-q.Done():
		t.Fatal("Reap ended a bound pod")
	default:
	}
	q.Stop(context.Background())
	if ex := q.Exit(); !ex.Stopped {
		t.Errorf("exit %+v, want stopped", ex)
	}
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not in 30 s", what)
		}
	}
}

// Find takes DOCKER_HOST when it is set and answers, and never passes it
// over for another engine when it does not.
func TestFind(t *testing.T) {
	t.Setenv("DOCKER_HOST", engine.Host)
	if h, err := container.Find(context.Background()); err != nil || h != engine.Host {
		t.Errorf("Find = %q, %v; want %s", h, err, engine.Host)
	}
	t.Setenv("DOCKER_HOST", "unix://"+t.TempDir()+"/none.sock")
	if h, err := container.Find(context.Background()); !errors.Is(err, container.ErrNoEngine) || !strings.Contains(err.Error(), "DOCKER_HOST=") {
		t.Errorf("Find with a dead DOCKER_HOST = %q, %v; want ErrNoEngine naming it", h, err)
	}
}

// A pod whose processes leave its session and double-fork leaves none of
// them behind once stopped: the container is the unit, not the process
// group.
func TestStop_leavesNoProcess(t *testing.T) {
	r := newRunner(t, engine.Host, t.TempDir())
	p, err := r.Start(spec("u1.0", "sh", "-c", "setsid sh -c 'sleep 600 & sleep 600' & echo forked; exec sleep 600"))
	if err != nil {
		t.Fatal(err)
	}
	owned := func() []int {
		var out []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil && p.Owns(pid) {
				out = append(out, pid)
			}
		}
		return out
	}
	eventually(t, "three processes in the container", func() bool { return len(owned()) >= 3 })
	p.Stop(context.Background())
	if left := owned(); len(left) > 0 {
		t.Errorf("processes %v of the stopped pod are left", left)
	}
}

// A workload's labels are on its container, under the runner's own, which
// a label of the same key cannot replace.
func TestStart_workloadLabels(t *testing.T) {
	dir := t.TempDir()
	r := newRunner(t, engine.Host, dir)
	s := spec("u1.0", "sleep", "600")
	s.Labels = map[string]string{"team": "vision", container.LabelProject: "team-z"}
	p, err := r.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(context.Background())
	cli, err := client.New(client.WithHost(engine.Host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	in, err := cli.ContainerInspect(context.Background(), "runway-"+runner.Name(dir)+"-u1.0", client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := in.Container.Config.Labels; l["team"] != "vision" || l[container.LabelProject] != "team-a" {
		t.Errorf("container labels %v, want team=vision and the runner's project", l)
	}
}
