package container

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupCPUFile is the file holding the CPU usage of the cgroup of pid
// (the container's first process, seen from the agent's cgroup
// namespace): cpuacct.usage on cgroup v1, cpu.stat on v2 (v2 true). ""
// when the agent cannot read it (another host, a rootless engine).
func cgroupCPUFile(pid int) (string, bool) {
	if pid <= 0 {
		return "", false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", false
	}
	var unified string
	for line := range strings.Lines(string(b)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			unified = f[2]
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "cpuacct" {
				if p := filepath.Join(cgroupRoot, "cpuacct", f[2], "cpuacct.usage"); readable(p) {
					return p, false
				}
			}
		}
	}
	for _, mount := range []string{cgroupRoot, filepath.Join(cgroupRoot, "unified")} {
		if p := filepath.Join(mount, unified, "cpu.stat"); unified != "" && readable(p) {
			return p, true
		}
	}
	return "", false
}

func readable(path string) bool { _, err := os.Stat(path); return err == nil }

// stats is one reading of the engine's stats of the container.
func (p *pod) stats() (container.StatsResponse, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	var s container.StatsResponse
	res, err := p.r.cli.ContainerStats(ctx, p.cid, client.ContainerStatsOptions{})
	if err != nil {
		return s, false
	}
	defer res.Body.Close()
	return s, json.NewDecoder(res.Body).Decode(&s) == nil
}

// memory is the memory the container holds now, as its engine counts it.
func (p *pod) memory() int64 {
	s, _ := p.stats()
	return int64(s.MemoryStats.Usage)
}

// CPU is the container's CPU time so far: from its cgroup, else from the
// engine's stats.
func (p *pod) CPU() time.Duration {
	if p.cpuFile != "" {
		if b, err := os.ReadFile(p.cpuFile); err == nil {
			if !p.cpuV2 {
				ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
				return time.Duration(ns)
			}
			for line := range strings.Lines(string(b)) {
				if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
					us, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					return time.Duration(us) * time.Microsecond
				}
			}
		}
	}
	s, _ := p.stats()
	return time.Duration(s.CPUStats.CPUUsage.TotalUsage)
}
