package kubelet

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runwayhq/runway/pkg/procstat"
)

// Defaults for empty Config fields.
const (
	DefaultProcRoot   = "/proc"
	DefaultCgroupRoot = "/sys/fs/cgroup"
)

// maxCgroupDepth bounds the walk for a pod's cgroup directory: the deepest
// kubelet layout (a v1 controller, a cgroup root of its own, kubepods,
// QoS, pod) is well within it.
const maxCgroupDepth = 8

// Config is where a node's processes and cgroups are seen.
type Config struct {
	// ProcRoot is the host's proc mount (DefaultProcRoot when empty): the
	// agent must see the host's pids (hostPID), which NVML reports.
	ProcRoot string
	// CgroupRoot is the host's cgroup mount (DefaultCgroupRoot when
	// empty), or a directory below it.
	CgroupRoot string
}

// Node is the pods of one node, by UID. It is safe for concurrent use.
type Node struct {
	cfg Config

	mu    sync.Mutex
	pods  map[string]*Pod // the pods followed
	owner map[int]string  // pid → pod UID, of followed pods, as the last Refresh saw
}

// New follows the pods of the node whose processes cfg's roots show.
func New(cfg Config) *Node {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = DefaultProcRoot
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = DefaultCgroupRoot
	}
	return &Node{cfg: cfg, pods: map[string]*Pod{}, owner: map[int]string{}}
}

// Pod is one pod the kubelet runs, found by its UID.
type Pod struct {
	n    *Node
	uid  string
	done chan struct{}

	mu     sync.Mutex
	pids   []int // as the last Refresh saw, the main process first
	cgroup string
	v1     bool      // cgroup is a v1 freezer directory (no cgroup.freeze, cpu.stat or cgroup.kill)
	looked time.Time // when the cgroup was last looked for, in vain
	cpu    time.Duration
	ended  bool
}

// Follow starts following the pod of uid (the same Pod when it is
// followed already); its processes are seen from the next Refresh.
func (n *Node) Follow(uid string) *Pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.pods[uid]; p != nil {
		return p
	}
	p := &Pod{n: n, uid: uid, done: make(chan struct{})}
	n.pods[uid] = p
	return p
}

// Forget stops following the pod of uid (the kubelet ended it, or it is
// no longer the agent's): its Done is closed, and a Freeze is undone.
func (n *Node) Forget(uid string) {
	n.mu.Lock()
	p := n.pods[uid]
	delete(n.pods, uid)
	n.mu.Unlock()
	if p == nil {
		return
	}
	p.Freeze(false)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ended {
		p.ended = true
		close(p.done)
	}
}

// Refresh walks the proc root once and gives every followed pod its
// processes now and its CPU time.
func (n *Node) Refresh() {
	ents, err := os.ReadDir(n.cfg.ProcRoot)
	if err != nil {
		return
	}
	n.mu.Lock()
	followed := make(map[string]*Pod, len(n.pods))
	for uid, p := range n.pods {
		followed[uid] = p
	}
	n.mu.Unlock()
	owner := map[int]string{}
	procs := map[string][]procstat.Proc{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(n.cfg.ProcRoot, e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		uid, ok := PodUID(string(b))
		if !ok || followed[uid] == nil {
			continue
		}
		st, ok := procstat.ReadIn(n.cfg.ProcRoot, e.Name())
		if !ok {
			continue // gone, or a zombie
		}
		owner[pid] = uid
		procs[uid] = append(procs[uid], st)
	}
	n.mu.Lock()
	n.owner = owner
	n.mu.Unlock()
	for uid, p := range followed {
		p.refresh(procs[uid])
	}
}

func (p *Pod) refresh(procs []procstat.Proc) {
	// The main process is the oldest that is not the sandbox's pause.
	slices.SortFunc(procs, func(a, b procstat.Proc) int {
		pa, pb := p.isPause(a.PID), p.isPause(b.PID)
		switch {
		case pa != pb && pa:
			return 1
		case pa != pb:
			return -1
		case a.Start != b.Start:
			return cmp.Compare(a.Start, b.Start)
		}
		return cmp.Compare(a.PID, b.PID)
	})
	var cpu time.Duration
	pids := make([]int, len(procs))
	for i, pr := range procs {
		pids[i] = pr.PID
		cpu += pr.CPU
	}
	dir, v1 := p.cgroupDir()
	if dir != "" && !v1 {
		if c, ok := cgroupCPU(dir); ok {
			cpu = c // it counts the pod's ended processes too
		}
	}
	p.mu.Lock()
	p.pids, p.cpu = pids, max(cpu, p.cpu)
	p.mu.Unlock()
}

func (p *Pod) isPause(pid int) bool {
	b, _ := os.ReadFile(filepath.Join(p.n.cfg.ProcRoot, strconv.Itoa(pid), "comm"))
	return string(bytes.TrimSpace(b)) == "pause"
}

// UID is the pod's UID.
func (p *Pod) UID() string { return p.uid }

// Pid is the pod's main process (0 when none is seen).
func (p *Pod) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pids) == 0 {
		return 0
	}
	return p.pids[0]
}

// Pids are the pod's processes as the last Refresh saw them.
func (p *Pod) Pids() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pids)
}

// Dir is the main process's working directory, through the proc root (the
// container's own file system): where the simulated GPU backend reads
// the memory a pod declares. "" when the pod has no process.
func (p *Pod) Dir() string {
	pid := p.Pid()
	if pid == 0 {
		return ""
	}
	return filepath.Join(p.n.cfg.ProcRoot, strconv.Itoa(pid), "cwd")
}

// Owns reports whether pid was one of the pod's processes at the last
// Refresh.
func (p *Pod) Owns(pid int) bool {
	p.n.mu.Lock()
	defer p.n.mu.Unlock()
	return p.n.owner[pid] == p.uid
}

// CPU is the pod's CPU time at the last Refresh.
func (p *Pod) CPU() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cpu
}

// Done is closed once the pod is forgotten.
func (p *Pod) Done() <-chan struct{} { return p.done }

// Freeze stops (true) or continues (false) every process of the pod: its
// cgroup's freezer (v2 cgroup.freeze, else v1 freezer.state), else
// SIGSTOP/SIGCONT to each process.
func (p *Pod) Freeze(on bool) {
	dir, v1 := p.cgroupDir()
	if dir != "" {
		file, v := "cgroup.freeze", map[bool]string{true: "1", false: "0"}[on]
		if v1 {
			file, v = "freezer.state", map[bool]string{true: "FROZEN", false: "THAWED"}[on]
		}
		if os.WriteFile(filepath.Join(dir, file), []byte(v), 0) == nil {
			return
		}
	}
	sig := syscall.SIGCONT
	if on {
		sig = syscall.SIGSTOP
	}
	for _, pid := range p.Pids() {
		_ = syscall.Kill(pid, sig)
	}
}

// Frozen reports whether the pod's cgroup freezer holds it.
func (p *Pod) Frozen() bool {
	dir, v1 := p.cgroupDir()
	if dir == "" {
		return false
	}
	if v1 {
		b, _ := os.ReadFile(filepath.Join(dir, "freezer.state"))
		return string(bytes.TrimSpace(b)) == "FROZEN"
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	return bytes.Contains(b, []byte("frozen 1"))
}

// Kill ends every process of the pod at once (cgroup.kill where the pod's
// cgroup v2 directory has one, else SIGKILL to each process the last
// Refresh saw), continuing a frozen pod so that it dies now.
func (p *Pod) Kill() error {
	dir, v1 := p.cgroupDir()
	if dir != "" && !v1 && os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil {
		return nil
	}
	pids := p.Pids()
	if len(pids) == 0 {
		return fmt.Errorf("pod %s: no process to kill", p.uid)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	p.Freeze(false) // a v1-frozen process takes its SIGKILL once thawed
	return nil
}

// lookAgain is how long a pod whose cgroup was not found waits before it
// is looked for again (the kubelet may not have made it yet).
const lookAgain = 10 * time.Second

// cgroupDir is the pod's cgroup directory ("" when none was found), v1
// for a freezer v1 one; once found, it is kept.
func (p *Pod) cgroupDir() (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cgroup == "" && time.Since(p.looked) >= lookAgain {
		p.cgroup, p.v1 = findCgroup(p.n.cfg.CgroupRoot, p.uid)
		p.looked = time.Now()
	}
	return p.cgroup, p.v1
}

// findCgroup walks root for the directory of the pod uid: a cgroup v2 one
// (it has cgroup.freeze), else a v1 freezer one (freezer.state).
func findCgroup(root, uid string) (dir string, v1 bool) {
	var v1dir string
	errFound := errors.New("found")
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		if strings.Count(strings.TrimPrefix(path, root), "/") > maxCgroupDepth {
			return fs.SkipDir
		}
		if got, ok := SegmentUID(d.Name()); !ok || got != uid {
			return nil
		}
		if exists(filepath.Join(path, "cgroup.freeze")) {
			dir = path
			return errFound
		}
		if v1dir == "" && exists(filepath.Join(path, "freezer.state")) {
			v1dir = path
		}
		return fs.SkipDir
	})
	if dir != "" {
		return dir, false
	}
	return v1dir, v1dir != ""
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// cgroupCPU reads usage_usec from a cgroup v2 directory's cpu.stat.
func cgroupCPU(dir string) (time.Duration, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Duration(us) * time.Microsecond, err == nil
		}
	}
	return 0, false
}
