package local

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/runwayhq/runway/pkg/procstat"
	"github.com/runwayhq/runway/pkg/runner"
)

// A pod's first process is the child of a shim, not of the agent: the
// runner's own executable started again (/proc/self/exe with shimEnv set,
// caught by init below before main), in a session of its own and outside
// the pod's cgroup. The shim starts the pod's command, writes the run
// record, waits for the command and writes how it ended. An agent killed
// with kill -9 takes neither down, and the next runner on the same data
// directory adopts the pod from its run record (the shim's and the
// leader's pid and start time, its cgroup) and learns its exit from the
// shim, or from the exit record when it ended while no agent ran. The
// kernel tells an exit status only to the parent: without the shim a
// pod that ends while its agent is down could not say whether it
// succeeded.
//
//	<DataDir>/<Spec.ID>/run   the run record (JSON), written by the shim as it starts the pod's command and once it runs
//	<DataDir>/<Spec.ID>/exit  how its first process ended (JSON), written by the shim

// Record file names in a pod's record directory.
const (
	RunName  = "run"
	ExitName = "exit"
)

// shimEnv marks the runner's executable started as a shim.
const shimEnv = "RUNWAY_LOCAL_POD_SHIM"

// shim's file descriptors: the control socket (the spec in, the pids or
// an error out) and the pod's cgroup directory.
const (
	shimControlFD = 3
	shimCgroupFD  = 4
)

func init() {
	if os.Getenv(shimEnv) == "1" {
		os.Exit(runShim())
	}
}

// shimSpec is what the runner sends its shim.
type shimSpec struct {
	Path string
	Args []string
	Env  []string
	Dir  string
	Cred *syscall.Credential
	// Cgroup: shimCgroupFD is the pod's cgroup directory, to start the
	// command in.
	Cgroup bool
	// Record is the run record, without the pids, which the shim adds.
	Record runRecord
	// RecordDir is where the run and exit records go.
	RecordDir string
	// Parent is the runner's pid: a shim whose runner died before it
	// started the command starts nothing (runShim).
	Parent int
	// Isolate starts the command in a mount namespace of its own with
	// Hide covered (mountns.go; the runner is root): made here, around the
	// command alone, so that the shim still reaches the data directory.
	Isolate bool
	Hide    []string
	// Files are the pod's credential files, written on a tmpfs of its
	// mount namespace (Isolate only): they never touch the node's disk.
	Files []runner.File
	// Mounts are the pod's data sources, bound in its mount namespace
	// (Isolate only).
	Mounts []runner.Mount
}

// runRecord is a pod's run record.
type runRecord struct {
	Revision    int64  `json:"revision"`
	Shim        int    `json:"shim"`
	ShimStart   uint64 `json:"shim_start"`
	Leader      int    `json:"leader"`
	LeaderStart uint64 `json:"leader_start"`
	// UID is the pod's own uid from the runner's range (0: none taken).
	UID      uint32 `json:"uid"`
	Cgroup   string `json:"cgroup"`
	Project  string `json:"project"`
	Workload string `json:"workload"` // its id
	Pod      int    `json:"pod"`
}

// exitRecord is how a pod's first process ended.
type exitRecord struct {
	Code     int  `json:"code"`
	Signaled bool `json:"signaled"`
}

// runShim is the shim's whole life; its exit code is for nobody (the
// exit record holds the pod's).
func runShim() int {
	// The parent-death signal is the main thread's, which init runs on
	// (locked there already; said again for the Prctl below).
	runtime.LockOSThread()
	// Signals are for the pod: the shim outlives everything but SIGKILL.
	// Caught, not ignored: an ignored signal would stay ignored in the
	// pod's command, a caught one is reset by its exec.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGPIPE)
	closeInherited()
	ctl := os.NewFile(shimControlFD, "control")
	var s shimSpec
	if err := json.NewDecoder(ctl).Decode(&s); err != nil {
		return 2 // the runner died before it sent the spec: nothing starts
	}
	cmd := &exec.Cmd{Path: s.Path, Args: s.Args, Env: s.Env, Dir: s.Dir, Stdout: os.Stdout, Stderr: os.Stderr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: s.Cred}
	if s.Cgroup {
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, shimCgroupFD
	}
	// The run is recorded before the command starts (with no leader yet),
	// so that no run of it goes unrecorded: a runner that finds this
	// record with its shim dead, or still starting, restarts the pod
	// saying so.
	rec := s.Record
	rec.Shim = os.Getpid()
	self, _ := procstat.Read(strconv.Itoa(rec.Shim))
	rec.ShimStart = self.Start
	run := filepath.Join(s.RecordDir, RunName)
	if err := writeJSON(run, rec); err != nil {
		fmt.Fprintf(ctl, "!record the run: %s\n", err)
		return 1
	}
	// Until the run is recorded the shim dies with its runner (its
	// parent-death signal): a runner that died before could not have seen
	// the record, and the next one, which may already have looked, starts
	// the pod itself, so this shim must neither run it nor write over the
	// next shim's record. From here it outlives its runner; one that died
	// since leaves the record to the next, which restarts the pod (it
	// never ran).
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, 0, 0, 0, 0); err != nil {
		_ = os.Remove(run)
		fmt.Fprintf(ctl, "!outlive the runner: %s\n", err)
		return 1
	}
	if os.Getppid() != s.Parent {
		return 2
	}
	start := cmd.Start
	if s.Isolate {
		start = func() error {
			return (&spawner{hide: s.Hide, binds: mountsSetup(s.Mounts)}).start(cmd, filesSetup(s.Files, s.Cred))
		}
	}
	err := start()
	if s.Cgroup {
		_ = unix.Close(shimCgroupFD)
	}
	if err != nil {
		_ = os.Remove(run)
		fmt.Fprintf(ctl, "!%s\n", err)
		return 1
	}
	rec.Leader = cmd.Process.Pid
	leader, _ := procstat.Read(strconv.Itoa(rec.Leader))
	rec.LeaderStart = leader.Start
	if err := writeJSON(run, rec); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		fmt.Fprintf(ctl, "!record the run: %s\n", err)
		return 1
	}
	fmt.Fprintf(ctl, "%d %d %d\n", rec.Leader, rec.LeaderStart, rec.ShimStart) // the runner may be gone: no matter
	_ = ctl.Close()
	_ = cmd.Wait()
	ex := exitRecord{Code: cmd.ProcessState.ExitCode()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ex = exitRecord{Code: 128 + int(ws.Signal()), Signaled: true}
	}
	if writeJSON(filepath.Join(s.RecordDir, ExitName), ex) != nil {
		return 1
	}
	return 0
}

// closeInherited marks every descriptor the shim inherited but stdin,
// stdout and stderr close-on-exec: the pod's command gets neither the
// control socket (it could answer for the shim) nor its cgroup's directory,
// nor one the agent itself inherited without close-on-exec.
func closeInherited() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	ents, _ := os.ReadDir("/proc/self/fd") // before Linux 5.11
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// startShim starts the shim of a pod and hands it s; it returns the shim
// and the leader's pid and start time once the command runs (its run
// record written).
func startShim(s shimSpec, log *os.File, cgroup *os.File) (*exec.Cmd, runRecord, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, runRecord{}, err
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "shim-control"), os.NewFile(uintptr(fds[1]), "shim-control")
	defer mine.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"runway-pod-shim", filepath.Base(s.RecordDir)}
	// GOMAXPROCS=1: the shim waits, nothing more.
	cmd.Env = []string{shimEnv + "=1", "GOMAXPROCS=1", "GOGC=off"}
	cmd.Dir = s.RecordDir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.ExtraFiles = []*os.File{theirs}
	if cgroup != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, cgroup)
	}
	// SIGKILL when the runner dies, until the shim has recorded the run
	// (runShim). Sent when the forking thread ends: the runner's threads
	// end only with the process (none that forks is locked).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	_ = theirs.Close()
	if err != nil {
		return nil, runRecord{}, err
	}
	fail := func(err error) (*exec.Cmd, runRecord, error) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, runRecord{}, err
	}
	if err := json.NewEncoder(mine).Encode(s); err != nil {
		return fail(fmt.Errorf("shim: %w", err))
	}
	line, err := bufio.NewReader(mine).ReadString('\n')
	if msg, failed := strings.CutPrefix(line, "!"); failed {
		_ = cmd.Wait()
		return nil, runRecord{}, errors.New(strings.TrimSpace(msg))
	}
	rec := s.Record
	if _, serr := fmt.Sscan(line, &rec.Leader, &rec.LeaderStart, &rec.ShimStart); err != nil || serr != nil {
		return fail(fmt.Errorf("shim: no answer (%v)", errors.Join(err, serr)))
	}
	rec.Shim = cmd.Process.Pid
	return cmd, rec, nil
}

// writeJSON writes v to path through a temporary file and a rename, so
// that a reader sees the old record or the new one.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readJSON reads the record at path into v.
func readJSON(path string, v any) bool {
	b, err := os.ReadFile(path)
	return err == nil && json.Unmarshal(b, v) == nil
}

// alive reports whether pid is still the process that started at start
// (not a reused pid, not a zombie).
func alive(pid int, start uint64) bool {
	p, ok := procstat.Read(strconv.Itoa(pid)) // false for a zombie
	return ok && pid > 1 && p.Start == start
}

// waitGone blocks until the process pid that started at start has ended
// (at once when it already has): its pidfd turns readable.
func waitGone(pid int, start uint64) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if !alive(pid, start) { // checked after the open: the pidfd is of the right process
		return
	}
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
