// Package procstat reads processes from /proc: CPU time, parent, process
// group and session. It is how Runway measures a local pod's activity
// without a GPU and how the local runner follows a pod's processes where
// it has no cgroup: one walk of /proc (Snapshot) serves every pod.
package procstat

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// tick is the unit of the CPU times in /proc/<pid>/stat (USER_HZ), 100 per
// second on every Linux build Runway runs on.
const tick = 10 * time.Millisecond

// pageSize is the unit of rss in /proc/<pid>/stat.
var pageSize = int64(os.Getpagesize())

// Proc is one live (not zombie) process.
type Proc struct {
	PID, PPID, PGID, SID int
	// Start is the start time in clock ticks since boot: with PID, it
	// names a process across pid reuse.
	Start uint64
	// CPU is the user and system time of the process and its reaped
	// children.
	CPU time.Duration
	// RSS is the resident set size in bytes.
	RSS int64
}

// Snapshot reads every live process in one walk of /proc.
func Snapshot() map[int]Proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make(map[int]Proc, len(ents))
	for _, e := range ents {
		if c := e.Name()[0]; c < '0' || c > '9' {
			continue
		}
		if p, ok := Read(e.Name()); ok {
			out[p.PID] = p
		}
	}
	return out
}

// Read reads one process by its pid (decimal); false when it is gone or a
// zombie.
func Read(pid string) (Proc, bool) { return ReadIn("/proc", pid) }

// ReadIn is Read under another proc mount (a host's /proc seen from a
// container, or a test's tree).
func ReadIn(root, pid string) (Proc, bool) {
	b, err := os.ReadFile(root + "/" + pid + "/stat")
	if err != nil {
		return Proc{}, false
	}
	return parse(string(b))
}

// GroupCPU returns the CPU time used so far by the live members of each
// process group in pgids. Groups without a live member are absent. It
// scans /proc once whatever the number of groups.
func GroupCPU(pgids ...int) map[int]time.Duration {
	want := make(map[int]bool, len(pgids))
	for _, g := range pgids {
		want[g] = true
	}
	out := make(map[int]time.Duration, len(pgids))
	for _, p := range Snapshot() {
		if want[p.PGID] {
			out[p.PGID] += p.CPU
		}
	}
	return out
}

// Group returns the process group of pid, and false when pid is gone.
func Group(pid int) (int, bool) {
	p, ok := Read(strconv.Itoa(pid))
	return p.PGID, ok
}

// parse reads the fields Runway needs from a /proc/<pid>/stat line; they
// follow the ")" closing the command name, which may hold spaces.
func parse(s string) (Proc, bool) {
	pid, err := strconv.Atoi(strings.TrimSpace(s[:max(strings.IndexByte(s, '('), 0)]))
	i := strings.LastIndexByte(s, ')')
	if err != nil || i < 0 {
		return Proc{}, false
	}
	// Fields from 3 (state) on: ppid 4, pgrp 5, session 6, utime..cstime
	// 14..17, starttime 22, rss 24 (pages).
	f := strings.Fields(s[i+1:])
	if len(f) < 22 || f[0] == "Z" {
		return Proc{}, false
	}
	var n [3]int
	for j := range 3 {
		if n[j], err = strconv.Atoi(f[1+j]); err != nil {
			return Proc{}, false
		}
	}
	var ticks int64
	for _, x := range f[11:15] {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return Proc{}, false
		}
		ticks += v
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return Proc{}, false
	}
	rss, err := strconv.ParseInt(f[21], 10, 64)
	if err != nil {
		return Proc{}, false
	}
	return Proc{PID: pid, PPID: n[0], PGID: n[1], SID: n[2], Start: start, CPU: time.Duration(ticks) * tick,
		RSS: rss * pageSize}, true
}
