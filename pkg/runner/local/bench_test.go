package local_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/local"
)

// BenchmarkStart is the wall time of starting one pod, with a cgroup per
// pod and with session tracking (stopping them is off the clock). Most of
// it is the wait for the child's exec, with the starting thread held in
// vfork. agent-cpu-us/op is the runner's own CPU time (user and system)
// per start, which a loaded machine does not stretch as it does the wall
// time: the file system's inode allocations, the clone.
func BenchmarkStart(b *testing.B) {
	for _, mode := range []string{"", "none"} {
		name := "cgroup"
		if mode == "none" {
			name = "session"
		}
		b.Run(name, func(b *testing.B) {
			r, err := local.New(local.Config{DataDir: b.TempDir(), Cgroup: mode, UIDs: local.DefaultUIDs})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			ps := make([]*local.Process, 0, b.N)
			cpu0 := selfCPU(b)
			for i := range b.N {
				p, err := r.Start(local.Spec{ID: "p" + strconv.Itoa(i), Command: []string{"sleep", "600"}})
				if err != nil {
					b.Fatal(err)
				}
				ps = append(ps, p.(*local.Process))
			}
			b.StopTimer()
			b.ReportMetric(float64((selfCPU(b)-cpu0).Microseconds())/float64(b.N), "agent-cpu-us/op")
			for _, p := range ps {
				p.Kill()
			}
		})
	}
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCPU is one sample of the CPU time of 200 running pods (what the
// node agent reads every SampleInterval), with a cgroup per pod.
func BenchmarkCPU(b *testing.B) {
	r, err := local.New(local.Config{DataDir: b.TempDir(), UIDs: local.DefaultUIDs})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	ps := make([]runner.Pod, 200)
	for i := range ps {
		if ps[i], err = r.Start(local.Spec{ID: "p" + strconv.Itoa(i), Command: []string{"sleep", "600"}}); err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, p := range ps {
			p.Kill()
		}
	}()
	b.ResetTimer()
	for b.Loop() {
		r.CPU(ps...)
	}
}
