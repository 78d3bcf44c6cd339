package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultStopGrace is Config.StopGrace when it is 0.
const DefaultStopGrace = 10 * time.Second

// LogName is the name of a pod's log file in its directory.
const LogName = "output.log"

// Environment variables every pod gets.
const (
	EnvVisibleDevices = "CUDA_VISIBLE_DEVICES"
	EnvWorkload       = "RUNWAY_WORKLOAD"  // projects/{project}/workloads/{workload}
	EnvProject        = "RUNWAY_PROJECT"   // the project id
	EnvPodIndex       = "RUNWAY_POD_INDEX" // the pod's index in its gang
	EnvFractionMilli  = "RUNWAY_GPU_FRACTION_MILLI"
	EnvGPUMemoryLimit = "RUNWAY_GPU_MEMORY_LIMIT_BYTES"
)

// Config is the runner's setup.
type Config struct {
	// DataDir holds one directory per pod. Required.
	DataDir string
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL;
	// DefaultStopGrace when 0.
	StopGrace time.Duration
}

// Runner starts pods as local processes. It is safe for concurrent use.
type Runner struct {
	cfg Config
}

// New returns a runner; the data directory is created on first Start. Pods
// left running by an earlier runner on the same directory (an agent killed
// with kill -9 cannot stop them) are killed first, so a restarted agent never
// runs a second copy of a pod next to the first.
func New(cfg Config) (*Runner, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("local runner: Config.DataDir is empty")
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	reapOrphans(cfg.DataDir)
	return &Runner{cfg: cfg}, nil
}

// PgidName is the file in a pod's directory holding its process group id
// while it runs.
const PgidName = "pgid"

// reapOrphans kills the process groups recorded in the pods' pgid files. A
// group is killed only when its leader still works in that pod's directory,
// so a reused process id of an unrelated program is left alone.
func reapOrphans(dataDir string) {
	files, _ := filepath.Glob(filepath.Join(dataDir, "*", PgidName))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pgid <= 1 {
			continue
		}
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pgid))
		if err == nil && filepath.Clean(cwd) == filepath.Dir(f) {
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
		_ = os.Remove(f)
	}
}

// Spec is one pod to run.
type Spec struct {
	// ID names the pod's directory; unique per pod on the node, made of
	// [A-Za-z0-9._-] (for example "team-a.train-1.0").
	ID string
	// Command is the program and its arguments. Required.
	Command []string
	// Env is extra KEY=VALUE pairs (the workload's env); they come after the
	// agent's own environment and before the RUNWAY_* variables, which win.
	Env []string
	// Workload is projects/{project}/workloads/{workload}; Project its id.
	Workload, Project string
	// Pod is the pod's index in its gang.
	Pod int
	// Devices are the GPU indexes the pod may use (CUDA_VISIBLE_DEVICES);
	// none hides every GPU.
	Devices []int
	// FractionMilli is the share of each device, 1000 for whole devices.
	FractionMilli int64
	// GPUMemoryBytes is the device memory the pod may use; 0 is no limit.
	GPUMemoryBytes int64
}

// Start starts the pod's command in its own process group and returns at
// once; watch Process.Done for its end.
func (r *Runner) Start(spec Spec) (*Process, error) {
	if len(spec.Command) == 0 {
		return nil, fmt.Errorf("start pod %q: empty command", spec.ID)
	}
	if spec.ID == "" || strings.ContainsAny(spec.ID, "/\\") || spec.ID == "." || spec.ID == ".." {
		return nil, fmt.Errorf("start pod: invalid id %q", spec.ID)
	}
	dir := filepath.Join(r.cfg.DataDir, spec.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	logPath := filepath.Join(dir, LogName)
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	defer log.Close() // the child has its own descriptor

	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = dir
	cmd.Env = environ(spec)
	cmd.Stdout, cmd.Stderr = log, log // *os.File: Wait does not wait on children's copies
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pod %q: %w", spec.ID, err)
	}
	p := &Process{cmd: cmd, pgid: cmd.Process.Pid, grace: r.cfg.StopGrace, logPath: logPath, dir: dir,
		done: make(chan struct{})}
	// Recorded so that a runner started after this one dies can find it.
	if err := os.WriteFile(filepath.Join(dir, PgidName), []byte(strconv.Itoa(p.pgid)), 0o644); err != nil {
		_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		_ = cmd.Wait()
		return nil, fmt.Errorf("start pod %q: record its process group: %w", spec.ID, err)
	}
	go p.wait()
	return p, nil
}

func environ(spec Spec) []string {
	devs := make([]string, len(spec.Devices))
	for i, d := range spec.Devices {
		devs[i] = strconv.Itoa(d)
	}
	env := append(os.Environ(), spec.Env...)
	return append(env,
		EnvVisibleDevices+"="+strings.Join(devs, ","),
		EnvWorkload+"="+spec.Workload,
		EnvProject+"="+spec.Project,
		EnvPodIndex+"="+strconv.Itoa(spec.Pod),
		EnvFractionMilli+"="+strconv.FormatInt(spec.FractionMilli, 10),
		EnvGPUMemoryLimit+"="+strconv.FormatInt(spec.GPUMemoryBytes, 10),
	)
}

// Process is one started pod.
type Process struct {
	cmd     *exec.Cmd
	pgid    int
	grace   time.Duration
	logPath string
	dir     string
	done    chan struct{}

	mu       sync.Mutex
	exit     Exit
	stopping bool
}

// Exit is how a process ended.
type Exit struct {
	// Code is the exit status; 128+signal when a signal killed it (the
	// shell's convention).
	Code int
	// Signaled is true when a signal ended the process.
	Signaled bool
	// Stopped is true when Stop was called before it ended.
	Stopped bool
}

func (p *Process) wait() {
	_ = p.cmd.Wait() // the exit status is in ProcessState
	_ = os.Remove(filepath.Join(p.dir, PgidName))
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

// Pid is the process id, which is also its process group id.
func (p *Process) Pid() int { return p.pgid }

// Dir is the pod's working directory.
func (p *Process) Dir() string { return p.dir }

// LogPath is the file holding the pod's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit is how the process ended; valid once Done is closed.
func (p *Process) Exit() Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Stop ends the process group: SIGTERM, then SIGKILL once the grace period
// has passed or ctx is done, whichever is first. The group is SIGKILLed
// even when the leader exits within the grace period, so that children
// which ignore SIGTERM do not survive. It returns when the leader has
// exited; calling it again, or after the process ended, is harmless.
func (p *Process) Stop(ctx context.Context) {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	_ = syscall.Kill(-p.pgid, syscall.SIGTERM)
	// A group stopped by a time-slicing plan handles SIGTERM only once
	// continued.
	_ = syscall.Kill(-p.pgid, syscall.SIGCONT)
	t := time.NewTimer(p.grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
	}
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL) // ESRCH once the group is empty
	<-p.done
}

// Kill ends the process group at once with SIGKILL, without Stop's grace,
// and returns when the leader has exited. It is how the node agent ends a
// pod over its GPU memory slice: the pod must not keep the memory through
// a grace period.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	<-p.done
}
