package local_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/local"
)

// Data sources in the process runtime: a node directory bound read-only
// (reads work, writes fail), one made for the pod in the hidden data
// directory bound read-write and given to the pod's user; a missing
// directory, a missing mount point and NFS are refused at start.
func TestProcess_DataSourceMounts(t *testing.T) {
	data := t.TempDir()
	r, err := local.New(local.Config{DataDir: data, StopGrace: time.Second, UIDs: local.DefaultUIDs, Hide: []string{data}})
	if err != nil {
		t.Fatal(err)
	}
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "hello.txt"), []byte("from the node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(host, 0o755); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(data, "made-for-the-pod")
	if err := os.MkdirAll(clone, 0o700); err != nil {
		t.Fatal(err)
	}
	// Mount points the node has (the process runtime never makes them).
	ro, rw := t.TempDir(), t.TempDir()
	for _, d := range []string{ro, rw, filepath.Dir(ro)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, err := r.Start(local.Spec{ID: "m", Command: []string{"sh", "-c",
		`cat "$RO/hello.txt" > out 2>&1; (echo x > "$RO/new") 2>> out && echo WROTE-RO >> out; echo y > "$RW/f" && echo rw-ok >> out`},
		Env:    []string{"RO=" + ro, "RW=" + rw},
		Mounts: []runner.Mount{{Target: ro, HostPath: host, ReadOnly: true}, {Target: rw, HostPath: clone, Owned: true}}})
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, p)
	out, _ := os.ReadFile(filepath.Join(p.Dir(), "out"))
	if s := string(out); !strings.Contains(s, "from the node") || !strings.Contains(s, "Read-only file system") || strings.Contains(s, "WROTE-RO") || !strings.Contains(s, "rw-ok") {
		t.Errorf("the pod saw:\n%s", s)
	}
	if b, err := os.ReadFile(filepath.Join(clone, "f")); err != nil || string(b) != "y\n" {
		t.Errorf("the read-write mount's file: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(host, "new")); err == nil {
		t.Error("the pod wrote into the read-only node directory")
	}
	for _, tc := range []struct {
		m    runner.Mount
		want string
	}{
		{runner.Mount{Target: ro, HostPath: "/no/such/dir"}, "the node has no directory /no/such/dir"},
		{runner.Mount{Target: ro, NFSServer: "nfs", NFSPath: "/x"}, "mounts no NFS export"},
		{runner.Mount{Target: "/no/such/mount/point", HostPath: host}, "it has no /no/such/mount/point"},
	} {
		p, err := r.Start(local.Spec{ID: "bad", Command: []string{"true"}, Mounts: []runner.Mount{tc.m}})
		if err == nil {
			waitDone(t, p)
			_ = r.Remove("bad")
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mount %+v: %v, want %q", tc.m, err, tc.want)
		}
	}
}
