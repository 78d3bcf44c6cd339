// Package podmantest starts a real podman API service (the Docker Engine
// API) on a unix socket in a temporary directory, with its own storage,
// and builds a busybox image in it from the host's /bin/busybox (no
// registry): what the container runtime's tests run against
// (../shared/TOOLCHAIN.md §6: runc, cgroupfs, no default ulimits).
//
// Podman is not optional: without it (or busybox-static) Start fails the
// test saying to run `make podman`.
package podmantest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/runner/container"
)

// Image is the busybox image Start builds: /bin/busybox and its applets
// (sh, cat, ls, env, sleep, ...), nothing else.
const Image = "localhost/runway-busybox:test"

// Engine is a running podman API service.
type Engine struct {
	// Host is its DOCKER_HOST (unix://DIR/podman.sock).
	Host string
	dir  string
}

// Start starts podman's API service for the test and stops it (removing
// its containers) when the test ends.
func Start(t testing.TB) *Engine {
	t.Helper()
	e, stop, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return e
}

// Main runs a package's tests (from TestMain) against one engine, set in
// *e, and returns their exit code; it fails them all when podman cannot
// start.
func Main(m *testing.M, e **Engine) int {
	eng, stop, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	*e = eng
	return m.Run()
}

func start() (*Engine, func(), error) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		return nil, nil, errors.New("podman is not installed: run `make podman` (apt-get install podman runc busybox-static, as root on Debian)")
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		return nil, nil, errors.New("/bin/busybox is missing: run `make podman` (it installs busybox-static)")
	}
	// A short path: a unix socket's path is at most 107 bytes.
	dir, err := os.MkdirTemp("", "podman")
	if err != nil {
		return nil, nil, err
	}
	e := &Engine{Host: "unix://" + filepath.Join(dir, "podman.sock"), dir: dir}
	fail := func(err error) (*Engine, func(), error) { _ = os.RemoveAll(dir); return nil, nil, err }
	if err := os.WriteFile(filepath.Join(dir, "containers.conf"), []byte("[containers]\ndefault_ulimits = []\n[network]\nnetwork_config_dir = \""+filepath.Join(dir, "networks")+"\"\n"), 0o600); err != nil {
		return fail(err)
	}
	// Registries on loopback are reached in plain HTTP, as dockerd reaches
	// 127.0.0.0/8 by default: the tests' own registries (Registry).
	if err := os.WriteFile(filepath.Join(dir, "registries.conf"), []byte("[[registry]]\nlocation = \"127.0.0.1\"\ninsecure = true\n"), 0o600); err != nil {
		return fail(err)
	}
	svc := exec.Command(podman, append(e.args(), "system", "service", "--time=0", e.Host)...)
	svc.Env = e.env()
	svc.Dir = dir // conmon writes files (an "oom" marker) in its working directory
	logPath := filepath.Join(dir, "service.log")
	log, err := os.Create(logPath)
	if err != nil {
		return fail(err)
	}
	svc.Stdout, svc.Stderr = log, log
	if err := svc.Start(); err != nil {
		_ = log.Close()
		return fail(fmt.Errorf("start podman system service: %w", err))
	}
	exited := make(chan error, 1)
	go func() { exited <- svc.Wait() }()
	stop := func() {
		_ = e.podman("rm", "--all", "--force", "--time", "0")
		e.removeNetworks()
		_ = svc.Process.Kill()
		<-exited
		_ = log.Close()
		_ = os.RemoveAll(dir)
	}
	for deadline := time.Now().Add(30 * time.Second); container.Ping(context.Background(), e.Host) != nil; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			b, _ := os.ReadFile(logPath)
			stop()
			return nil, nil, fmt.Errorf("podman system service exited (%v):\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			stop()
			return nil, nil, fmt.Errorf("podman system service did not answer on %s in 30 s:\n%s", e.Host, b)
		}
	}
	if err := e.buildImage(Image, nil); err != nil {
		stop()
		return nil, nil, err
	}
	return e, stop, nil
}

// args are podman's global flags: its own storage in the temporary
// directory, runc and cgroupfs (crun fails on hybrid cgroups).
func (e *Engine) args() []string {
	return []string{"--root", filepath.Join(e.dir, "root"), "--runroot", filepath.Join(e.dir, "run"),
		"--storage-driver", "vfs", "--runtime", "runc", "--cgroup-manager", "cgroupfs",
		"--tmpdir", filepath.Join(e.dir, "tmp")}
}

func (e *Engine) env() []string {
	return append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(e.dir, "containers.conf"),
		"CONTAINERS_REGISTRIES_CONF="+filepath.Join(e.dir, "registries.conf"))
}

// podman runs a podman command on the engine's storage.
func (e *Engine) podman(args ...string) error {
	cmd := exec.Command("podman", append(e.args(), args...)...)
	cmd.Env = e.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("podman %v: %v\n%s", args, err, out)
	}
	return nil
}

// ImageWith builds image tag: Image's busybox and, at each path of files
// (an absolute path in the image), the host file it names, mode 0755 (a
// static binary the test built: a server for its pods).
func (e *Engine) ImageWith(t testing.TB, tag string, files map[string]string) string {
	t.Helper()
	if err := e.buildImage(tag, files); err != nil {
		t.Fatal(err)
	}
	return tag
}

// buildImage imports image tag: a root of only /bin/busybox and links to
// it, and files.
func (e *Engine) buildImage(tag string, files map[string]string) error {
	root, err := os.MkdirTemp(e.dir, "rootfs")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	if err := os.Chmod(root, 0o755); err != nil { // the image's /, which every pod's user walks
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		return err
	}
	for _, d := range []string{"tmp", "proc", "sys", "dev", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		return err
	}
	for _, c := range []string{"sh", "cat", "ls", "env", "echo", "sleep", "head", "dd", "grep", "true", "false", "id", "sort", "tr", "wc", "mkdir", "setsid", "nc", "chown"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", c)); err != nil {
			return err
		}
	}
	for at, from := range files {
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(at)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, at), b, 0o755); err != nil {
			return err
		}
	}
	tar := root + ".tar"
	defer os.Remove(tar)
	if out, err := exec.Command("tar", "-C", root, "-cf", tar, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("tar the busybox root: %v\n%s", err, out)
	}
	return e.podman("import", tar, tag)
}

// removeNetworks removes the pods' networks the runners made on the engine
// (kept in its own network_config_dir) and their guards (the runners'
// nftables tables), which are the host kernel's and would outlive it.
func (e *Engine) removeNetworks() {
	cmd := exec.Command("podman", append(e.args(), "network", "ls", "--filter", "label="+container.LabelRunner,
		"--format", "{{.Name}} {{.Labels}}")...)
	cmd.Env = e.env()
	out, err := cmd.Output()
	if err != nil {
		return
	}
	for line := range strings.Lines(string(out)) {
		name, labels, _ := strings.Cut(strings.TrimSpace(line), " ")
		for _, l := range strings.Split(labels, ",") {
			if runner, ok := strings.CutPrefix(l, container.LabelRunner+"="); ok {
				_ = exec.Command("nft", "delete", "table", "inet", container.GuardTable(runner)).Run()
				_ = e.podman("network", "rm", "--force", name)
			}
		}
	}
}

// Push pushes the engine's image to ref (a reference on a registry of
// 127.0.0.1, reached in plain HTTP) as username with password.
func (e *Engine) Push(t testing.TB, image, ref, username, password string) {
	t.Helper()
	if err := e.podman("push", "--tls-verify=false", "--creds", username+":"+password, image, ref); err != nil {
		t.Fatal(err)
	}
}

// Remove removes an image from the engine's storage, so that the next
// pod of it pulls.
func (e *Engine) Remove(t testing.TB, image string) {
	t.Helper()
	if err := e.podman("rmi", "--force", image); err != nil {
		t.Fatal(err)
	}
}
