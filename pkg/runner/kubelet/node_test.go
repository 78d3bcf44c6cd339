package kubelet_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/runner/kubelet"
)

// procTree names real processes in a proc tree of the test's: <pid>/cgroup
// says which pod each is in, the rest links to /proc.
func procTree(t *testing.T, pods map[int]string) string {
	t.Helper()
	root := t.TempDir()
	for pid, cg := range pods {
		d := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"stat", "cwd", "comm"} {
			if err := os.Symlink(filepath.Join("/proc", strconv.Itoa(pid), f), filepath.Join(d, f)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup"), []byte(cg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func start(t *testing.T, dir string, argv ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = dir
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c
}

func state(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// A followed pod has the processes whose cgroup names it (not another
// pod's, not a host process), its main process's directory, its CPU time;
// without a cgroup directory it is frozen by SIGSTOP and killed by SIGKILL.
func TestNode_podByCgroup(t *testing.T) {
	dir := t.TempDir()
	mine := start(t, dir, "sh", "-c", "while :; do :; done")
	other := start(t, t.TempDir(), "sleep", "60")
	host := start(t, t.TempDir(), "sleep", "60")
	const otherUID = "0f1c2a4b-5d6e-4f70-8a9b-0c1d2e3f4a5b"
	procs := procTree(t, map[int]string{
		mine.Process.Pid:  "0::/kubepods/burstable/pod" + uid + "/abc\n",
		other.Process.Pid: "0::/kubepods.slice/" + kubelet.SystemdSegment("", otherUID) + "/x.scope\n",
		host.Process.Pid:  "0::/system.slice/containerd.service\n",
	})
	n := kubelet.New(kubelet.Config{ProcRoot: procs, CgroupRoot: t.TempDir()})
	p := n.Follow(uid)
	if n.Follow(uid) != p {
		t.Fatal("Follow of a followed pod gave another Pod")
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.Refresh(); p.CPU() == 0; n.Refresh() {
		if time.Now().After(deadline) {
			t.Fatal("the busy pod's CPU time stayed 0 for 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if p.Pid() != mine.Process.Pid || !p.Owns(mine.Process.Pid) || p.Owns(other.Process.Pid) || p.Owns(host.Process.Pid) {
		t.Errorf("pod: pid %d, owns mine %v, the other pod's %v, the host's %v", p.Pid(),
			p.Owns(mine.Process.Pid), p.Owns(other.Process.Pid), p.Owns(host.Process.Pid))
	}
	if got, _ := filepath.EvalSymlinks(p.Dir()); got != dir {
		t.Errorf("Dir() links to %q, want %q", got, dir)
	}
	p.Freeze(true)
	for state(mine.Process.Pid) != "T" {
		if time.Now().After(deadline) {
			t.Fatalf("frozen pod's process in state %q", state(mine.Process.Pid))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	err := mine.Wait()
	if ws, ok := mine.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the pod's process ended with %v, want SIGKILL", err)
	}
	if state(other.Process.Pid) == "" || state(host.Process.Pid) == "" {
		t.Error("Kill ended a process that is not the pod's")
	}
	n.Forget(uid)
	select {
	case <-p.Done():
	default:
		t.Error("Done not closed once the pod is forgotten")
	}
}

// The pod's cgroup directory is found under the root: a v2 one (with
// cgroup.freeze) before a v1 freezer one, none for another pod's.
func TestNode_findsCgroup(t *testing.T) {
	root := t.TempDir()
	v1 := filepath.Join(root, "freezer", "kubepods", "burstable", "pod"+uid)
	v2 := filepath.Join(root, "unified", "kubepods.slice", "kubepods-burstable.slice", kubelet.SystemdSegment("burstable", uid))
	for dir, file := range map[string]string{v1: "freezer.state", v2: "cgroup.freeze"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte("0"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := kubelet.New(kubelet.Config{ProcRoot: t.TempDir(), CgroupRoot: root}).Follow(uid)
	p.Freeze(true)
	if b, _ := os.ReadFile(filepath.Join(v2, "cgroup.freeze")); string(b) != "1" {
		t.Errorf("v2 cgroup.freeze = %q after Freeze(true), want 1", b)
	}
	if b, _ := os.ReadFile(filepath.Join(v1, "freezer.state")); string(b) != "0" {
		t.Errorf("v1 freezer.state = %q: written though a v2 directory exists", b)
	}
	if err := os.RemoveAll(filepath.Join(root, "unified")); err != nil {
		t.Fatal(err)
	}
	p = kubelet.New(kubelet.Config{ProcRoot: t.TempDir(), CgroupRoot: root}).Follow(uid)
	p.Freeze(true)
	if b, _ := os.ReadFile(filepath.Join(v1, "freezer.state")); string(b) != "FROZEN" {
		t.Errorf("v1 freezer.state = %q after Freeze(true), want FROZEN", b)
	}
}
