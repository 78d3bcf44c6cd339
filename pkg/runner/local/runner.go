package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
}

// New returns a runner. Pods left running by an earlier runner on the same
// directories (an agent killed with kill -9 cannot stop them) are killed
// first, so a restarted agent never runs a second copy of a pod next to
// the first.
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
	r.reapOrphans()
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

// PidName is the file in a pod's record directory naming its leader ("pid
// start-time") while it runs, when the pod has no cgroup.
const PidName = "pid"

// reapOrphans kills what earlier runners left: every pod cgroup (of this
// runner's cgroup directory, and of the one it detects by default, which an
// earlier runner on the same data directory may have used), and each
// recorded session whose leader is still the recorded process (a reused
// pid of an unrelated program is left alone).
func (r *Runner) reapOrphans() {
	dirs := cgroupDirs(runner.Name(r.cfg.DataDir))
	if r.cfg.Cgroup != "" && !slices.Contains(dirs, r.cfg.Cgroup) {
		dirs = append(dirs, r.cfg.Cgroup)
	}
	for _, dir := range dirs {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.IsDir() {
				m := newMembers(0, filepath.Join(dir, e.Name()), cgroupMount(dir))
				_ = m.killAll(drainTimeout)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(r.cfg.DataDir, "*", PidName))
	var snap map[int]procstat.Proc
	for _, f := range files {
		b, err := os.ReadFile(f)
		_ = os.Remove(f)
		var pid int
		var start uint64
		if err != nil {
			continue
		}
		if _, err := fmt.Sscan(string(b), &pid, &start); err != nil || pid <= 1 {
			continue
		}
		if snap == nil {
			snap = procstat.Snapshot()
		}
		if p, ok := snap[pid]; ok && p.Start == start {
			m := newMembers(pid, "", "")
			m.refresh(snap)
			_ = m.killAll(drainTimeout)
		}
	}
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
// for its end.
func (r *Runner) Start(spec Spec) (runner.Pod, error) {
	if len(spec.Command) == 0 {
		return nil, fmt.Errorf("start pod %q: empty command", spec.ID)
	}
	if !validID(spec.ID) {
		return nil, fmt.Errorf("start pod: invalid id %q", spec.ID)
	}
	rec, work := r.RecordDir(spec.ID), r.PodDir(spec.ID)
	if err := os.MkdirAll(rec, 0o700); err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
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
	defer log.Close() // the child has its own descriptor

	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = work
	cmd.Env = environ(spec, work)
	if p, err := lookPath(spec.Command[0]); err == nil {
		cmd.Path, cmd.Err = p, nil // found on the pod's PATH, not the agent's
	} else {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	cmd.Stdout, cmd.Stderr = log, log // *os.File: Wait does not wait on children's copies
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	cg := ""
	if r.cfg.Cgroup != "" {
		cg = filepath.Join(r.cfg.Cgroup, spec.ID)
		if err := os.Mkdir(cg, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("start pod %q: cgroup: %w", spec.ID, err)
		}
		fd, err := syscall.Open(cg, syscall.O_DIRECTORY|syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("start pod %q: cgroup: %w", spec.ID, err)
		}
		defer syscall.Close(fd)
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	forks <- struct{}{}
	if r.spawn != nil {
		err = r.spawn.start(cmd, filesSetup(spec.Files, cred))
	} else if len(spec.Files) > 0 {
		err = errNoFiles
	} else {
		err = cmd.Start()
	}
	<-forks
	if err != nil {
		if cg != "" {
			_ = os.Remove(cg)
		}
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	started = true
	pid := cmd.Process.Pid
	p := &Process{cmd: cmd, pid: pid, grace: r.cfg.StopGrace, logPath: logPath, dir: work, rec: rec,
		members: newMembers(pid, cg, r.cgMount), done: make(chan struct{}),
		release: func() { r.ids.put(uid); disown(work) }}
	// Recorded so that a runner started after this one dies can find it: a
	// pod's cgroup is its own record (reapOrphans lists them); in session
	// mode its leader is written down. Each file created costs as much as
	// the clone on a busy ext4 (its inode allocation), so no more are made.
	if cg == "" {
		st, _ := procstat.Read(strconv.Itoa(pid))
		if err := os.WriteFile(filepath.Join(rec, PidName), fmt.Appendf(nil, "%d %d", pid, st.Start), 0o600); err != nil {
			p.members.signal(syscall.SIGKILL)
			_ = cmd.Wait()
			_ = p.members.killAll(drainTimeout)
			p.release()
			return nil, fmt.Errorf("start pod %q: record its process: %w", spec.ID, err)
		}
	}
	go p.wait()
	return p, nil
}

// forks bounds the pod starts in flight in this process (every runner of
// it: `runway dev` runs many agents): each start holds an OS thread
// blocked in vfork until the child has exec'd, and thousands of bindings
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
	cmd     *exec.Cmd
	pid     int
	grace   time.Duration
	logPath string
	dir     string
	rec     string
	members *members
	release func()
	done    chan struct{}

	mu       sync.Mutex
	exit     Exit
	stopping bool
}

// Exit is how a process ended.
type Exit = runner.Exit

// wait waits for the leader, then ends what is left of the pod: a pod
// ends with its first process, as a container does.
func (p *Process) wait() {
	_ = p.cmd.Wait() // the exit status is in ProcessState
	_ = p.members.killAll(drainTimeout)
	p.members.closeCPUStat() // killAll closes it too, unless a process outlived it
	if p.members.cgroup == "" {
		_ = os.Remove(filepath.Join(p.rec, PidName))
	}
	p.release()
	ex := Exit{Code: p.cmd.ProcessState.ExitCode()}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ex = Exit{Code: 128 + int(ws.Signal()), Signaled: true}
	}
	p.mu.Lock()
	ex.Stopped = p.stopping
	p.exit = ex
	p.mu.Unlock()
	close(p.done)
}

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
