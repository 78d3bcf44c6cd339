// Package procstat reads the CPU time of process groups from /proc. It is
// how Runway measures a local pod's activity without a GPU: the simulated
// GPU backend derives utilisation from it, and the time-slicing enforcer
// tells busy sharers from idle ones.
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

// GroupCPU returns the CPU time (user and system, including the reaped
// children of each member) used so far by the live members of each process
// group in pgids. Groups without a live member are absent. It scans /proc
// once whatever the number of groups.
func GroupCPU(pgids ...int) map[int]time.Duration {
	want := make(map[int]bool, len(pgids))
	for _, g := range pgids {
		want[g] = true
	}
	out := make(map[int]time.Duration, len(pgids))
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range ents {
		if c := e.Name()[0]; c < '0' || c > '9' {
			continue
		}
		st, ok := readStat("/proc/" + e.Name() + "/stat")
		if ok && want[st.pgrp] {
			out[st.pgrp] += st.cpu
		}
	}
	return out
}

// Group returns the process group of pid, and false when pid is gone.
func Group(pid int) (int, bool) {
	st, ok := readStat("/proc/" + strconv.Itoa(pid) + "/stat")
	return st.pgrp, ok
}

type stat struct {
	pgrp int
	cpu  time.Duration
}

// readStat parses the fields Runway needs from a /proc/<pid>/stat file;
// they follow the ")" closing the command name, which may hold spaces.
func readStat(path string) (stat, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	// Fields from 3 (state) on: pgrp is field 5, utime..cstime 14..17.
	f := strings.Fields(s[i+1:])
	if len(f) < 15 || f[0] == "Z" {
		return stat{}, false
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return stat{}, false
	}
	var ticks int64
	for _, x := range f[11:15] {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return stat{}, false
		}
		ticks += n
	}
	return stat{pgrp: pgrp, cpu: time.Duration(ticks) * tick}, true
}
