package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runwayhq/runway/pkg/procstat"
	"github.com/runwayhq/runway/pkg/runner"
)

// DefaultStopGrace is Config.StopGrace when it is 0.
const DefaultStopGrace = 10 * time.Second

// LogName is the name of a pod's log file in its record directory.
const LogName = runner.LogName

// drainTimeout bounds the wait for a killed pod's last processes.
const drainTimeout = 10 * time.Second

// shimSettle bounds the wait for the shim of a dead runner that was
// starting its pod: it records the leader or ends within a moment.
const shimSettle = 2 * time.Second

// Environment variables every pod gets (pkg/runner's).
const (
	EnvVisibleDevices = runner.EnvVisibleDevices
	EnvWorkload       = runner.EnvWorkload
	EnvProject        = runner.EnvProject
	EnvPodIndex       = runner.EnvPodIndex
	EnvFractionMilli  = runner.EnvFractionMilli
	EnvGPUMemoryLimit = runner.EnvGPUMemoryLimit
)

// podPath is the PATH every pod gets.
const podPath = runner.PodPath

// Config is the runner's setup.
type Config struct {
	// DataDir is the runner's own: one record directory per pod (its log,
	// its process record), never readable by pods (mode 0700). Required.
	DataDir string
	// WorkDir holds the pods' working directories, each owned by its pod
	// (0700) in a directory pods may cross but not list (0711). It must
	// not be inside DataDir. Empty: os.TempDir()/runway-pods/<hash of
	// DataDir>.
	WorkDir string
	// User is the account pods run as when the runner is root and UIDs is
	// zero; DefaultUser when empty.
	User string
	// UIDs, when set, gives each running pod (as root) a uid and gid of
	// its own from the range instead of User's: pods then cannot read
	// each other's files, /proc entries or signal each other.
	UIDs UIDRange
	// Cgroup is the cgroup v2 directory under which each pod gets its
	// own; empty detects one, "none" follows pods by session instead.
	Cgroup string
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL;
	// DefaultStopGrace when 0.
	StopGrace time.Duration
	// Hide are paths no pod may see (the agent's key files, its
	// credentials' directories, `runway dev`'s data): as root, each pod
	// starts in a mount namespace where they are covered and /proc shows
	// only its own processes (mountns.go). None may hold WorkDir; DataDir
	// is always hidden.
	Hide []string
}

// Runner starts pods as local processes. It is safe for concurrent use.
type Runner struct {
	cfg     Config
	cgMount string // the cgroup v2 mount holding cfg.Cgroup
	ids     *identities
	spawn   *spawner // nil when not root: pods share the agent's view

	mu      sync.Mutex
	orphans map[string]runRecord // by pod id: pods an earlier runner left running, until adopted or reaped
}

// New returns a runner. Pods an earlier runner on the same directories
// left running (its agent killed with kill -9) are kept for Start to
// adopt, or Reap to end; whatever else of them is left (a pod's processes
// whose shim is gone, a cgroup without a live run) is killed, so a
// restarted agent never runs a second copy of a pod next to the first.
func New(cfg Config) (*Runner, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("local runner: Config.DataDir is empty")
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	dirs, err := runner.MakeDirs(cfg.DataDir, cfg.WorkDir, "runway-pods")
	if err != nil {
		return nil, fmt.Errorf("local runner: %w", err)
	}
	cfg.DataDir, cfg.WorkDir = dirs.Data, dirs.Work
	name := dirs.Name
	r := &Runner{cfg: cfg}
	if r.ids, err = newIdentities(cfg.User, cfg.UIDs); err != nil {
		return nil, err
	}
	switch cfg.Cgroup {
	case "":
		r.cfg.Cgroup = detectCgroup(name)
	case "none":
		r.cfg.Cgroup = ""
	default:
		if err := os.MkdirAll(cfg.Cgroup, 0o755); err != nil {
			return nil, fmt.Errorf("local runner: cgroup: %w", err)
		}
	}
	if r.cfg.Cgroup != "" {
		r.cgMount = cgroupMount(r.cfg.Cgroup)
	}
	if r.ids.root {
		hide, err := hidden(append([]string{cfg.DataDir}, cfg.Hide...), cfg.WorkDir)
		if err != nil {
			return nil, err
		}
		// Without its namespace a root runner would show pods the agent's
		// credentials and every tenant's command line: it does not start.
		if r.spawn, err = newSpawner(hide); err != nil {
			return nil, fmt.Errorf("local runner: %w (the process runtime as root needs CAP_SYS_ADMIN; else use --runtime container)", err)
		}
	}
	r.findOrphans()
	return r, nil
}

// DefaultWorkDir is Config.WorkDir when it is empty, for the data
// directory dataDir: os.TempDir()/runway-pods/<hash of its absolute path>.
func DefaultWorkDir(dataDir string) string { return runner.DefaultWorkDir(dataDir, "runway-pods") }

// Describe says how pods run, for the agent's log.
func (r *Runner) Describe() string {
	return "as local processes (" + r.Isolation() + "; " + r.Tracking() + ", work directory " + r.cfg.WorkDir + ")"
}

// Isolation says in a phrase what keeps pods apart from the agent and
// from each other.
func (r *Runner) Isolation() string {
	if r.spawn == nil {
		return "no isolation: every pod runs as the agent's own user, reads what it reads and sees its processes"
	}
	who := "each pod its own uid"
	if r.ids.ids.First == 0 {
		who = fmt.Sprintf("every pod as uid %d (pods are not kept from each other)", r.ids.uid)
	}
	return who + ", a mount namespace hiding the agent's credentials and data, " + r.spawn.proc + " (hidepid: only its own processes)"
}

// Tracking says how the runner follows pods' processes: "cgroup DIR" or
// "session".
func (r *Runner) Tracking() string {
	if r.cfg.Cgroup != "" {
		return "cgroup " + r.cfg.Cgroup
	}
	return "session"
}

// cgroupMount is the root of the cgroup v2 mount holding dir: the last
// ancestor whose parent is not a cgroup.
func cgroupMount(dir string) string {
	d := dir
	for {
		parent := filepath.Dir(d)
		if parent == d {
			return d
		}
		if _, err := os.Stat(filepath.Join(parent, "cgroup.procs")); err != nil {
			return d
		}
		d = parent
	}
}

// Close removes the runner's cgroup directory once no pod is left in it.
func (r *Runner) Close() {
	if r.cfg.Cgroup != "" {
		_ = os.Remove(r.cfg.Cgroup)
	}
}

// membersOf follows the processes of a recorded run.
func membersOf(rec runRecord) *members {
	if rec.Cgroup == "" {
		return newMembers(rec.Leader, "", "")
	}
	return newMembers(rec.Leader, rec.Cgroup, cgroupMount(rec.Cgroup))
}

// findOrphans reads what earlier runners on this data directory left:
// each run whose shim still runs (its command started) is kept (its uid taken again, so that no
// new pod shares it); the processes of a run whose shim is gone are
// killed (its pod ends with its first process, which the shim no longer
// watches), its records left for Start to tell how it ended; so is every
// pod cgroup (of this runner's cgroup directory, and of the one it detects
// by default) that no live run holds.
func (r *Runner) findOrphans() {
	r.orphans = map[string]runRecord{}
	held := map[string]bool{}
	files, _ := filepath.Glob(filepath.Join(r.cfg.DataDir, "*", RunName))
	for _, f := range files {
		var rec runRecord
		if !readJSON(f, &rec) {
			continue
		}
		id := filepath.Base(filepath.Dir(f))
		if rec.Leader == 0 && alive(rec.Shim, rec.ShimStart) {
			// Its agent died as the shim started the pod. Past its parent
			// check the shim starts the command and records the leader (a
			// live run, adopted); before it the shim ends (Start restarts
			// the pod). Either takes a moment: a shim still starting after
			// shimSettle is ended here, its pod started again by Start.
			for deadline := time.Now().Add(shimSettle); rec.Leader == 0 && alive(rec.Shim, rec.ShimStart) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				_ = readJSON(f, &rec)
			}
			if rec.Leader == 0 && alive(rec.Shim, rec.ShimStart) {
				_ = syscall.Kill(rec.Shim, syscall.SIGKILL)
				waitGone(rec.Shim, rec.ShimStart)
				_ = readJSON(f, &rec) // with its leader, if it got that far
			}
		}
		if alive(rec.Shim, rec.ShimStart) {
			r.orphans[id] = rec
			r.ids.reserve(rec.UID)
			held[rec.Cgroup] = true
			continue
		}
		// A session's id is not reused while a process of it lives: the
		// processes of that session are the pod's.
		if rec.Cgroup != "" || rec.Leader > 1 {
			m := membersOf(rec)
			m.refresh(procstat.Snapshot())
			_ = m.killAll(drainTimeout)
		}
		disown(r.PodDir(id)) // its uid is free again
	}
	dirs := cgroupDirs(runner.Name(r.cfg.DataDir))
	if r.cfg.Cgroup != "" && !slices.Contains(dirs, r.cfg.Cgroup) {
		dirs = append(dirs, r.cfg.Cgroup)
	}
	for _, dir := range dirs {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if cg := filepath.Join(dir, e.Name()); e.IsDir() && !held[cg] {
				_ = newMembers(0, cg, cgroupMount(dir)).killAll(drainTimeout)
			}
		}
	}
}

// Reap ends the pods an earlier runner left running whose binding is gone
// (deleted while no agent ran); Start adopts the others.
func (r *Runner) Reap(bound func(project, workload string, pod int) bool) {
	r.mu.Lock()
	gone := map[string]runRecord{}
	for id, rec := range r.orphans {
		if !bound(rec.Project, rec.Workload, rec.Pod) {
			gone[id] = rec
			delete(r.orphans, id)
		}
	}
	r.mu.Unlock()
	for id, rec := range gone {
		r.end(id, rec)
	}
}

// end kills orphan id and waits for its shim to record the end.
func (r *Runner) end(id string, rec runRecord) {
	m := membersOf(rec)
	m.refresh(procstat.Snapshot())
	_ = m.killAll(drainTimeout)
	waitGone(rec.Shim, rec.ShimStart)
	disown(r.PodDir(id))
	r.ids.put(rec.UID)
}

// Spec is one pod to run; the process runtime ignores its Image, CPU and
// memory.
type Spec = runner.Spec

// RecordDir is the runner's directory of pod id (its log).
func (r *Runner) RecordDir(id string) string { return filepath.Join(r.cfg.DataDir, id) }

// PodDir is the working directory of pod id.
func (r *Runner) PodDir(id string) string { return filepath.Join(r.cfg.WorkDir, id) }

// Remove deletes a finished pod's directories and log.
func (r *Runner) Remove(id string) error {
	if !validID(id) {
		return fmt.Errorf("remove pod: invalid id %q", id)
	}
	return errors.Join(os.RemoveAll(r.RecordDir(id)), os.RemoveAll(r.PodDir(id)))
}

func validID(id string) bool {
	return id != "" && !strings.ContainsAny(id, "/\\") && id != "." && id != ".."
}

// Start starts the pod's command and returns at once; watch Process.Done
// for its end. The run of spec.Revision that an earlier runner left is
// adopted instead (Origin Adopted): followed while it runs, or its
// recorded exit given; one that died without a recorded exit is started
// again (Origin Restarted). An earlier run of another revision still
// running is killed first.
func (r *Runner) Start(spec Spec) (runner.Pod, error) {
	if len(spec.Command) == 0 {
		return nil, fmt.Errorf("start pod %q: empty command", spec.ID)
	}
	if !validID(spec.ID) {
		return nil, fmt.Errorf("start pod: invalid id %q", spec.ID)
	}
	rec, work := r.RecordDir(spec.ID), r.PodDir(spec.ID)
	r.mu.Lock()
	orphan, ok := r.orphans[spec.ID]
	delete(r.orphans, spec.ID)
	r.mu.Unlock()
	if ok && orphan.Revision == spec.Revision {
		return r.adopt(spec, orphan, nil), nil
	}
	if ok {
		r.end(spec.ID, orphan)
	}
	origin := runner.Started
	var last runRecord
	if readJSON(filepath.Join(rec, RunName), &last) && last.Revision == spec.Revision {
		var ex exitRecord
		if readJSON(filepath.Join(rec, ExitName), &ex) { // it ended while no runner watched
			return r.adopt(spec, last, &Exit{Code: ex.Code, Signaled: ex.Signaled}), nil
		}
		origin = runner.Restarted
	}
	if err := os.MkdirAll(rec, 0o700); err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	for _, name := range []string{RunName, ExitName} { // an earlier run's
		if err := os.Remove(filepath.Join(rec, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
		}
	}
	cred, uid, err := r.ids.take(spec.ID)
	if err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	started := false
	defer func() {
		if !started {
			r.ids.put(uid)
		}
	}()
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	if cred != nil {
		if err := os.Chown(work, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
		}
	}
	logPath := filepath.Join(rec, LogName)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	defer log.Close() // the shim has its own descriptor

	path, err := lookPath(spec.Command[0]) // on the pod's PATH, not the agent's
	if err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	ss := shimSpec{Path: path, Args: spec.Command, Env: environ(spec, work), Dir: work, Cred: cred, RecordDir: rec, Parent: os.Getpid(),
		Record: runRecord{Revision: spec.Revision, Project: spec.Project, Workload: workloadID(spec.Workload), Pod: spec.Pod}}
	if r.ids.ids.First != 0 {
		ss.Record.UID = uid
	}
	switch {
	case r.spawn != nil:
		ss.Isolate, ss.Hide, ss.Files, ss.Mounts = true, r.spawn.hide, spec.Files, spec.Mounts
	case len(spec.Files) > 0:
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, errNoFiles)
	case len(spec.Mounts) > 0:
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, errNoMounts)
	}
	if err := checkMounts(spec.Mounts, cred); err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	var cgFile *os.File
	cg := ""
	if r.cfg.Cgroup != "" {
		cg = filepath.Join(r.cfg.Cgroup, spec.ID)
		if err := os.Mkdir(cg, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("start pod %q: cgroup: %w", spec.ID, err)
		}
		if cgFile, err = os.Open(cg); err != nil {
			return nil, fmt.Errorf("start pod %q: cgroup: %w", spec.ID, err)
		}
		defer cgFile.Close()
		ss.Cgroup, ss.Record.Cgroup = true, cg
	}
	if origin == runner.Restarted && spec.Restarting != nil {
		spec.Restarting()
	}
	forks <- struct{}{}
	shim, run, err := startShim(ss, log, cgFile)
	<-forks
	if err != nil {
		if cg != "" {
			_ = os.Remove(cg)
		}
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	started = true
	p := r.process(spec, run, func() { _ = shim.Wait() })
	p.origin = origin
	go p.wait()
	return p, nil
}

// workloadID is the id in projects/{project}/workloads/{id}.
func workloadID(name string) string { return name[strings.LastIndex(name, "/")+1:] }

// adopt follows a run an earlier runner started: until its shim ends, or
// already ended with exit.
func (r *Runner) adopt(spec Spec, run runRecord, exit *Exit) *Process {
	p := r.process(spec, run, func() { waitGone(run.Shim, run.ShimStart) })
	p.origin = runner.Adopted
	if exit != nil {
		p.release = func() {}
		p.exit = *exit
		close(p.done)
		return p
	}
	// Frozen by a plan of the agent that died: this one's enforcer
	// freezes it again if a plan still says so.
	p.members.freeze(false)
	go p.wait()
	return p
}

// process is the Process of a run; waitShim returns once its shim has
// ended.
func (r *Runner) process(spec Spec, run runRecord, waitShim func()) *Process {
	rec, work := r.RecordDir(spec.ID), r.PodDir(spec.ID)
	return &Process{waitShim: waitShim, pid: run.Leader, grace: r.cfg.StopGrace, logPath: filepath.Join(rec, LogName),
		dir: work, rec: rec, members: membersOf(run), done: make(chan struct{}), ports: spec.Ports,
		release: func() { r.ids.put(run.UID); disown(work) }}
}

// forks bounds the pod starts in flight in this process (every runner of
// it: `runway dev` runs many agents): each start holds an OS thread
// blocked in vfork until the shim has exec'd, then waits for the shim to
// start the pod's command, and thousands of bindings
// arriving at once would otherwise make as many threads compete for the
// CPUs the children need. Measured in BenchmarkSubmitEndToEnd/agents=16.
var forks = make(chan struct{}, runtime.NumCPU())

// lookPath finds a command on the pod's PATH.
func lookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(podPath) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q not found in %s", name, podPath)
}

// environ is the pod's whole environment (pkg/runner's), at home in its
// working directory.
func environ(spec Spec, work string) []string { return runner.Environ(spec, work, spec.Devices) }

// CPU is the CPU time each of ps has used, in one walk of /proc at most
// (none when every pod has a cgroup).
func (r *Runner) CPU(pods ...runner.Pod) []time.Duration {
	var snap map[int]procstat.Proc
	out := make([]time.Duration, len(pods))
	for i, pod := range pods {
		p := pod.(*Process)
		if p.members.cgroup == "" && snap == nil {
			snap = procstat.Snapshot()
		}
		out[i] = p.members.cpu(snap)
	}
	return out
}

// Usage is what a pod uses of the node (pkg/runner's).
type Usage = runner.Usage

// Usage is the CPU time and memory of each of ps, in one walk of /proc at
// most (none when every pod has a cgroup).
func (r *Runner) Usage(pods ...runner.Pod) []Usage {
	var snap map[int]procstat.Proc
	out := make([]Usage, len(pods))
	for i, pod := range pods {
		p := pod.(*Process)
		if p.members.cgroup == "" && snap == nil {
			snap = procstat.Snapshot()
		}
		out[i] = Usage{CPU: p.members.cpu(snap), MemoryBytes: p.members.memory(snap)}
	}
	return out
}

// Process is one started pod.
type Process struct {
	waitShim func() // returns once the pod's shim has ended
	origin   runner.Origin
	pid      int
	grace    time.Duration
	logPath  string
	dir      string
	rec      string
	members  *members
	release  func()
	done     chan struct{}
	ports    []int // Spec.Ports: on the host's loopback, as the process listens

	mu       sync.Mutex
	exit     Exit
	stopping bool
}

// Exit is how a process ended.
type Exit = runner.Exit

// wait waits for the shim, which ends with the pod's first process, then
// ends what is left of the pod: a pod ends with its first process, as a
// container does.
func (p *Process) wait() {
	p.waitShim()
	_ = p.members.killAll(drainTimeout)
	p.members.closeCPUStat() // killAll closes it too, unless a process outlived it
	p.release()
	ex := Exit{Code: -1} // the shim was killed before it could say
	var er exitRecord
	if readJSON(filepath.Join(p.rec, ExitName), &er) {
		ex = Exit{Code: er.Code, Signaled: er.Signaled}
	}
	p.mu.Lock()
	ex.Stopped = p.stopping
	p.exit = ex
	p.mu.Unlock()
	close(p.done)
}

// Origin says whether Start started, adopted or restarted the pod.
func (p *Process) Origin() runner.Origin { return p.origin }

// Pid is the leader's process id (also its session and group id).
func (p *Process) Pid() int { return p.pid }

// Dir is the pod's working directory.
func (p *Process) Dir() string { return p.dir }

// LogPath is the file holding the pod's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed when the pod's last process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit is how the process ended; valid once Done is closed.
func (p *Process) Exit() Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Pids lists the pod's live processes.
func (p *Process) Pids() []int { return p.members.list() }

// Owns reports whether pid is one of the pod's processes (how NVML's
// processes are attributed to pods).
func (p *Process) Owns(pid int) bool { return p.members.owns(pid) }

// Freeze stops every process of the pod (true) or continues them (false):
// the time-slicing enforcer's lever.
func (p *Process) Freeze(on bool) { p.members.freeze(on) }

// CPU is the pod's CPU time so far (for one pod; Runner.CPU for many).
func (p *Process) CPU() time.Duration {
	if p.members.cgroup != "" {
		return p.members.cpu(nil) // cpu.stat: no walk of /proc
	}
	return p.members.cpu(procstat.Snapshot())
}

// Stop ends the pod: SIGTERM to every process, then SIGKILL once the grace
// period has passed or ctx is done, whichever is first. What is left when
// the leader exits is killed too. It returns when the last process has
// exited; calling it again, or after the process ended, is harmless.
func (p *Process) Stop(ctx context.Context) {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	// A pod frozen by a time-slicing plan handles SIGTERM only once
	// continued.
	p.members.freeze(false)
	p.members.signal(syscall.SIGTERM)
	p.members.signal(syscall.SIGCONT)
	t := time.NewTimer(p.grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
	}
	p.members.signal(syscall.SIGKILL)
	<-p.done
}

// Kill ends every process of the pod at once with SIGKILL, without Stop's
// grace, and returns when they have exited. It is how the node agent ends
// a pod over its GPU memory slice: the pod must not keep the memory
// through a grace period.
func (p *Process) Kill() {
	p.members.signal(syscall.SIGKILL)
	<-p.done
}

// Addresses is where the pod's ports are: a host process listens on the
// node itself, so each is on the loopback as it is. Nothing isolates them
// from other pods (this runtime isolates no network).
func (p *Process) Addresses() map[int]string {
	out := make(map[int]string, len(p.ports))
	for _, port := range p.ports {
		out[port] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	return out
}

var _ runner.Published = (*Process)(nil)
