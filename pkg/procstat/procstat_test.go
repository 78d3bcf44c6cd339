package procstat_test

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/procstat"
)

// A busy group accumulates CPU time, a sleeping one none, and a group
// whose members are gone is absent.
func TestGroupCPU(t *testing.T) {
	start := func(script string) *exec.Cmd {
		c := exec.Command("sh", "-c", script)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL); _ = c.Wait() })
		return c
	}
	busy := start(`while :; do :; done`)
	idle := start(`sleep 60`)
	deadline := time.Now().Add(10 * time.Second)
	for procstat.GroupCPU(busy.Process.Pid)[busy.Process.Pid] < 100*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatal("the busy group used less than 100 ms of CPU in 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := procstat.GroupCPU(busy.Process.Pid, idle.Process.Pid, 1<<30)
	if got[idle.Process.Pid] != 0 {
		t.Errorf("sleeping group used %v", got[idle.Process.Pid])
	}
	if _, ok := got[1<<30]; ok {
		t.Error("a group without processes is present")
	}
	if g, ok := procstat.Group(busy.Process.Pid); !ok || g != busy.Process.Pid {
		t.Errorf("Group(leader) = %d, %v", g, ok)
	}
}

// Snapshot sees a process with its parent, group and session.
func TestSnapshot(t *testing.T) {
	c := exec.Command("sleep", "60")
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	pid := c.Process.Pid
	p, ok := procstat.Snapshot()[pid]
	if !ok || p.PPID != syscall.Getpid() || p.PGID != pid || p.SID != pid || p.Start == 0 {
		t.Errorf("Snapshot()[%d] = %+v, %v; want its parent %d, group and session %d", pid, p, ok, syscall.Getpid(), pid)
	}
}

// The resident set of this process holds at least the memory it touched.
func TestRSS(t *testing.T) {
	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = 1
	}
	p, ok := procstat.Read(strconv.Itoa(os.Getpid()))
	if !ok || p.RSS < int64(len(held)) {
		t.Errorf("RSS = %d (%v), want at least %d", p.RSS, ok, len(held))
	}
	runtime.KeepAlive(held)
}
