package local

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runwayhq/runway/pkg/procstat"
)

// A pod's processes are followed in one of two ways:
//
//   - cgroup: the pod starts inside a cgroup v2 directory of its own
//     (clone3 CLONE_INTO_CGROUP, so not even its first instruction runs
//     outside it). Every descendant stays in it whatever it does (setsid,
//     double fork); cgroup.kill ends them all, cgroup.freeze stops them all,
//     cpu.stat is their CPU time, /proc/<pid>/cgroup says whose a process is.
//     No controller is needed, so the hybrid layouts' empty unified
//     hierarchy serves.
//   - session: where no cgroup v2 hierarchy is writable, the pod leads a
//     session of its own, and each Refresh (one walk of /proc for all
//     pods) adds to its members every process of its session or group and
//     every child of a member. A process that leaves the session and loses
//     its parent between two walks is not seen: this is a best effort.

// cgroupMagic is the statfs type of a cgroup v2 mount.
const cgroupMagic = 0x63677270

// cgroupV2Mounts are where a cgroup v2 hierarchy is looked for: the
// unified layout's root, and the hybrid layouts' unified hierarchy.
var cgroupV2Mounts = []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}

// detectCgroup returns the cgroup v2 directory under which this runner
// makes its pods' cgroups (name is the runner's own subdirectory), or ""
// when none is writable.
func detectCgroup(name string) string {
	for _, mnt := range cgroupV2Mounts {
		if !isCgroupV2(mnt) {
			continue
		}
		dir := filepath.Join(mnt, "runway", name)
		if os.MkdirAll(dir, 0o755) == nil {
			return dir
		}
	}
	return ""
}

// cgroupDirs are the runner directories named name that exist (what
// detectCgroup made for a runner of the same data directory).
func cgroupDirs(name string) []string {
	var out []string
	for _, mnt := range cgroupV2Mounts {
		dir := filepath.Join(mnt, "runway", name)
		if st, err := os.Stat(dir); err == nil && st.IsDir() && isCgroupV2(mnt) {
			out = append(out, dir)
		}
	}
	return out
}

func isCgroupV2(mnt string) bool {
	var st unix.Statfs_t
	return unix.Statfs(mnt, &st) == nil && st.Type == cgroupMagic
}

// members follows one pod's processes.
type members struct {
	leader int
	cgroup string // the pod's cgroup directory; "" in session mode
	cgRel  string // its path as /proc/<pid>/cgroup writes it

	mu      sync.Mutex
	pids    map[int]uint64 // session mode: member pid → start time
	cpuStat *os.File       // cgroup mode: cpu.stat, opened once and read again from 0
	closed  bool           // cpuStat closed for good (the pod ended)
}

func newMembers(leader int, cgroup, cgMount string) *members {
	m := &members{leader: leader, cgroup: cgroup, pids: map[int]uint64{}}
	if cgroup != "" {
		m.cgRel = "/" + strings.TrimPrefix(cgroup, cgMount)
		m.cgRel = filepath.Clean(m.cgRel)
	}
	return m
}

// refresh adds the members the snapshot shows (session mode) and drops
// the dead ones.
func (m *members) refresh(snap map[int]procstat.Proc) {
	if m.cgroup != "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for pid, start := range m.pids {
		if p, ok := snap[pid]; !ok || p.Start != start {
			delete(m.pids, pid)
		}
	}
	for _, p := range snap {
		if p.SID == m.leader || p.PGID == m.leader {
			m.pids[p.PID] = p.Start
		}
	}
	for grew := true; grew; { // children of members, to the last generation
		grew = false
		for _, p := range snap {
			if _, in := m.pids[p.PID]; !in {
				if _, parent := m.pids[p.PPID]; parent {
					m.pids[p.PID] = p.Start
					grew = true
				}
			}
		}
	}
}

// list is every member's pid now.
func (m *members) list() []int {
	if m.cgroup != "" {
		b, _ := os.ReadFile(filepath.Join(m.cgroup, "cgroup.procs"))
		var out []int
		for f := range strings.FieldsSeq(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return out
	}
	m.refresh(procstat.Snapshot())
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int, 0, len(m.pids))
	for pid := range m.pids {
		out = append(out, pid)
	}
	return out
}

// signal sends sig to every member (and to the session's group, which
// covers members started since the last walk).
func (m *members) signal(sig syscall.Signal) {
	if m.cgroup != "" && sig == syscall.SIGKILL {
		if os.WriteFile(filepath.Join(m.cgroup, "cgroup.kill"), []byte("1"), 0) == nil {
			return
		}
	}
	if m.leader > 1 { // 0 would signal the agent's own group
		_ = syscall.Kill(-m.leader, sig)
	}
	for _, pid := range m.list() {
		_ = syscall.Kill(pid, sig)
	}
}

// freeze stops (true) or continues (false) every member: the cgroup's
// freezer, else SIGSTOP/SIGCONT.
func (m *members) freeze(on bool) {
	if m.cgroup != "" {
		v := "0"
		if on {
			v = "1"
		}
		if os.WriteFile(filepath.Join(m.cgroup, "cgroup.freeze"), []byte(v), 0) == nil {
			return
		}
	}
	if on {
		m.signal(syscall.SIGSTOP)
	} else {
		m.signal(syscall.SIGCONT)
	}
}

// frozen reports whether the cgroup's freezer holds the pod.
func (m *members) frozen() bool {
	if m.cgroup == "" {
		return false
	}
	b, _ := os.ReadFile(filepath.Join(m.cgroup, "cgroup.freeze"))
	return bytes.Equal(bytes.TrimSpace(b), []byte("1"))
}

// empty reports whether no member is left.
func (m *members) empty() bool {
	if m.cgroup != "" {
		b, err := os.ReadFile(filepath.Join(m.cgroup, "cgroup.events"))
		return err != nil || bytes.Contains(b, []byte("populated 0"))
	}
	return len(m.list()) == 0
}

// cpu is the members' CPU time: cpu.stat in cgroup mode (it counts the
// dead members too), else the live members' from snap.
func (m *members) cpu(snap map[int]procstat.Proc) time.Duration {
	if m.cgroup != "" {
		b := m.readCPUStat()
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return time.Duration(us) * time.Microsecond
			}
		}
		return 0
	}
	m.refresh(snap)
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for pid := range m.pids {
		d += snap[pid].CPU
	}
	return d
}

// readCPUStat reads the cgroup's cpu.stat through a descriptor kept open
// from the first read to the pod's end: every pod is sampled every second,
// and opening a cgroup file costs several times reading it (kernfs
// allocates the open file under a lock all cgroups share); a seq file read
// from offset 0 is generated afresh.
func (m *members) readCPUStat() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cpuStat == nil && !m.closed {
		f, err := os.Open(filepath.Join(m.cgroup, "cpu.stat"))
		if err != nil {
			return nil
		}
		m.cpuStat = f
	}
	if m.cpuStat == nil {
		return nil
	}
	var buf [512]byte
	n, err := m.cpuStat.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	return buf[:n]
}

// closeCPUStat closes cpu.stat for good.
func (m *members) closeCPUStat() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cpuStat != nil {
		_ = m.cpuStat.Close()
		m.cpuStat = nil
	}
	m.closed = true
}

// memory is the memory the members hold: in cgroup mode memory.current
// where the memory controller is on (anonymous memory and the page cache
// they caused), else the sum of the resident sets of cgroup.procs; in
// session mode the sum of the live members' resident sets from snap.
func (m *members) memory(snap map[int]procstat.Proc) int64 {
	if m.cgroup != "" {
		if b, err := os.ReadFile(filepath.Join(m.cgroup, "memory.current")); err == nil {
			v, _ := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
			return v
		}
		b, _ := os.ReadFile(filepath.Join(m.cgroup, "cgroup.procs"))
		var n int64
		for _, pid := range strings.Fields(string(b)) {
			p, _ := procstat.Read(pid)
			n += p.RSS
		}
		return n
	}
	m.refresh(snap)
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for pid := range m.pids {
		n += snap[pid].RSS
	}
	return n
}

// owns reports whether pid is one of the pod's processes.
func (m *members) owns(pid int) bool {
	if m.cgroup != "" {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
		if err != nil {
			return false
		}
		for line := range strings.Lines(string(b)) {
			if rel, ok := strings.CutPrefix(strings.TrimSpace(line), "0::"); ok {
				return rel == m.cgRel || strings.HasPrefix(rel, m.cgRel+"/")
			}
		}
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.pids[pid]
	return ok || pid == m.leader
}

// killAll ends every member and waits until none is left (at most
// timeout), then removes the cgroup.
func (m *members) killAll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		m.signal(syscall.SIGKILL)
		if m.empty() {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of pod %d still alive after %v", m.leader, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m.cgroup != "" {
		m.closeCPUStat()
		if err := os.Remove(m.cgroup); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove cgroup %s: %w", m.cgroup, err)
		}
	}
	return nil
}
