package local_test

import (
	"strconv"
	"testing"

	"github.com/runwayhq/runway/pkg/runner/local"
)

// BenchmarkStart is the wall time of starting one pod, with a cgroup per
// pod and with session tracking (stopping them is off the clock). Most of
// it is the wait for the child's exec, with the starting thread held in
// vfork.
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
			for i := range b.N {
				p, err := r.Start(local.Spec{ID: "p" + strconv.Itoa(i), Command: []string{"sleep", "600"}})
				if err != nil {
					b.Fatal(err)
				}
				ps = append(ps, p.(*local.Process))
			}
			b.StopTimer()
			for _, p := range ps {
				p.Kill()
			}
		})
	}
}
