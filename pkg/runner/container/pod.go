package container

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/runner"
)

// logDrain bounds the wait for the last of an ended container's log.
const logDrain = 5 * time.Second

// pod is one pod's container.
type pod struct {
	r       *Runner
	cid     string // the container's full id
	dir     string
	logPath string
	pid     int
	cpuFile string // the cgroup's CPU usage file; "" asks the engine
	cpuV2   bool   // cpu.stat's usage_usec, else cpuacct.usage's nanoseconds
	limited bool   // it has a memory limit
	origin  runner.Origin
	ports   map[int]string // published ports' loopback addresses
	done    chan struct{}

	mu       sync.Mutex
	exit     runner.Exit
	stopping bool
	killed   bool // by Kill or Stop's SIGKILL
	paused   bool
}

// follow starts copying the container's log into the pod's record
// directory and waiting for its end.
func (r *Runner) follow(id string, c container.InspectResponse) *pod {
	p := &pod{r: r, cid: c.ID, dir: r.PodDir(id), logPath: filepath.Join(r.RecordDir(id), runner.LogName),
		done: make(chan struct{})}
	if c.State != nil {
		p.pid, p.paused = c.State.Pid, c.State.Paused
	}
	p.limited = c.HostConfig != nil && c.HostConfig.Memory > 0
	p.ports = published(c)
	p.cpuFile, p.cpuV2 = cgroupCPUFile(p.pid)
	// Paused by an agent that died: this one's enforcer pauses it again
	// if a plan still says so.
	p.Freeze(false)
	logged := make(chan struct{})
	go p.copyLog(logged)
	go p.wait(logged)
	return p
}

// copyLog copies the engine's whole log of the container, followed until
// it ends, over the log file: an adopted container's log is written
// again from its start, never twice.
func (p *pod) copyLog(logged chan<- struct{}) {
	defer close(logged)
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	rc, err := p.r.cli.ContainerLogs(context.Background(), p.cid, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		_, _ = f.WriteString("runway: the engine gave no log: " + err.Error() + "\n")
		return
	}
	defer rc.Close()
	_, _ = stdcopy.StdCopy(f, f, rc)
}

// completeLog reads the stopped container's whole log once more and writes
// it over the log file when the followed copy holds less: podman may end a
// follow early for a container that exits at once, and the output's end
// would be lost.
func (p *pod) completeLog() {
	fi, err := os.Stat(p.logPath)
	if err != nil {
		return
	}
	rc, err := p.r.cli.ContainerLogs(context.Background(), p.cid, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return
	}
	defer rc.Close()
	var all bytes.Buffer
	if _, err := stdcopy.StdCopy(&all, &all, io.LimitReader(rc, maxLogRead)); err != nil || int64(all.Len()) <= fi.Size() {
		return
	}
	_ = os.WriteFile(p.logPath, all.Bytes(), 0o600)
}

// maxLogRead bounds the second read of a stopped container's log.
const maxLogRead = 256 << 20

// wait waits for the container to stop, then reads how it ended.
func (p *pod) wait(logged <-chan struct{}) {
	ctx := context.Background()
	ex := runner.Exit{Code: -1}
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		w := p.r.cli.ContainerWait(ctx, p.cid, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		var err error
		select {
		case res := <-w.Result:
			ex.Code = int(res.StatusCode)
		case err = <-w.Error:
		}
		if err == nil || cerrdefs.IsNotFound(err) {
			break
		}
		time.Sleep(backoff) // the engine restarting: wait again
	}
	if c, err := p.r.inspect(ctx, p.cid); err == nil && c.State != nil {
		ex.Code, ex.OOMKilled = c.State.ExitCode, c.State.OOMKilled
	}
	select {
	case <-logged:
		p.completeLog()
	case <-time.After(logDrain):
	}
	p.mu.Lock()
	ex.Stopped = p.stopping
	ex.Signaled = ex.Code > 128
	// Podman 4 on cgroup v1 does not say OOMKilled: a SIGKILL that the
	// runner did not send, to a pod with a memory limit, is the kernel's.
	ex.OOMKilled = ex.OOMKilled || (ex.Code == 128+9 && p.limited && !p.killed && !p.stopping)
	p.exit = ex
	p.mu.Unlock()
	close(p.done)
}

func (p *pod) Pid() int              { return p.pid }
func (p *pod) Origin() runner.Origin { return p.origin }
func (p *pod) Dir() string           { return p.dir }
func (p *pod) LogPath() string       { return p.logPath }
func (p *pod) Done() <-chan struct{} { return p.done }

func (p *pod) Exit() runner.Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Owns reports whether pid runs in the container's cgroup.
func (p *pod) Owns(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && strings.Contains(string(b), p.cid)
}

// Freeze pauses the container (the freezer cgroup: every process of it)
// or unpauses it.
func (p *pod) Freeze(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paused == on {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	var err error
	if on {
		_, err = p.r.cli.ContainerPause(ctx, p.cid, client.ContainerPauseOptions{})
	} else {
		_, err = p.r.cli.ContainerUnpause(ctx, p.cid, client.ContainerUnpauseOptions{})
	}
	if err == nil {
		p.paused = on
	}
}

// Stop stops the container: SIGTERM, SIGKILL after the grace period or
// once ctx is done.
func (p *pod) Stop(ctx context.Context) {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	p.Freeze(false) // a paused container handles SIGTERM only once unpaused
	grace := int(p.r.cfg.StopGrace / time.Second)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_, _ = p.r.cli.ContainerStop(context.Background(), p.cid, client.ContainerStopOptions{Timeout: &grace})
	}()
	select {
	case <-p.done:
	case <-stopped:
	case <-ctx.Done():
		p.kill()
	}
	<-p.done
}

// Kill kills the container with SIGKILL at once.
func (p *pod) Kill() {
	p.Freeze(false)
	p.kill()
	<-p.done
}

func (p *pod) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	_, _ = p.r.cli.ContainerKill(ctx, p.cid, client.ContainerKillOptions{Signal: "KILL"})
}
