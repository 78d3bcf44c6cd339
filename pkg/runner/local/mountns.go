package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// spawner starts pods from OS threads that each unshared a mount
// namespace for that one pod: a fresh /proc with hidepid=invisible (a pod
// sees only the processes of its own uid: not the agent's, not its shim's,
// not other pods' command lines or environments) and Config.Hide covered
// (an empty read-only tmpfs on a directory, /dev/null on a file). A pod's
// shim makes it (runShim), around the pod's command only: the shim itself
// stays in the agent's view, where it writes the run and exit records in
// the hidden data directory. A child forked from such a thread starts in
// its namespace, and the mounts it inherits are locked: an unprivileged
// pod cannot unmount them, even in a user namespace of its own; it also
// starts with no_new_privs. Only root can make them (CAP_SYS_ADMIN). The
// thread is never unlocked, so it ends with the start, namespace and all.
type spawner struct {
	hide []string
	// binds, when set, bind a pod's data sources in its namespace before
	// hide is covered (mounts.go).
	binds func() error
	// proc says how /proc is private: "a private /proc" (a proc instance
	// of the pod's own) or "/proc remounted hidepid" (a container whose
	// masked /proc refuses a new instance: the shared one's options).
	proc string
}

// newSpawner checks that the pods' mount namespace can be made, or says
// why it cannot: the runner does not start without it.
func newSpawner(hide []string) (*spawner, error) {
	s := &spawner{hide: hide}
	how, err := s.onThread(func() error { return nil })
	if err != nil {
		return nil, fmt.Errorf("pods' mount namespace: %w", err)
	}
	s.proc = how
	return s, nil
}

// start starts cmd in a mount namespace of its own, after setup (nil:
// none) has run in that namespace.
func (s *spawner) start(cmd *exec.Cmd, setup func() error) error {
	_, err := s.onThread(func() error {
		if setup != nil {
			if err := setup(); err != nil {
				return err
			}
		}
		return cmd.Start()
	})
	return err
}

// onThread runs fn on a thread of its own, in a new pods' mount namespace,
// and says how its /proc is private.
func (s *spawner) onThread(fn func() error) (string, error) {
	type result struct {
		how string
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		how, err := podNamespace(s.hide, s.binds)
		if err == nil {
			err = fn()
		}
		done <- result{how, err}
	}()
	r := <-done
	return r.how, r.err
}

// podNamespace unshares the calling thread's mount namespace and makes it
// the pods' one, binding its data sources (binds, nil for none) before
// the hidden paths are covered; it says how /proc is private.
func podNamespace(hide []string, binds func() error) (string, error) {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return "", fmt.Errorf("unshare: %w", err)
	}
	// Nothing done here propagates back to the host's namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("make / private: %w", err)
	}
	if binds != nil {
		if err := binds(); err != nil {
			return "", err
		}
	}
	for _, p := range hide {
		if err := cover(p); err != nil {
			return "", err
		}
	}
	// The pod inherits it: no setuid program (su, mount, a planted one in
	// a shared directory) gives it back what it was started without.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "", fmt.Errorf("no_new_privs: %w", err)
	}
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	how := "a private /proc"
	if err := unix.Mount("proc", "/proc", "proc", flags, "hidepid=invisible"); err != nil {
		// A container's /proc has masked paths, and the kernel refuses a
		// new instance that would unmask them; its own instance (the
		// container's pid namespace: the agent and its pods) takes the
		// option instead, and the agent's group (root's, which no pod
		// has) still sees every pod, with or without CAP_SYS_PTRACE.
		opts := fmt.Sprintf("hidepid=invisible,gid=%d", os.Getegid())
		if err2 := unix.Mount("", "/proc", "", unix.MS_REMOUNT|flags, opts); err2 != nil {
			return "", fmt.Errorf("mount /proc with hidepid: %w; remount: %w", err, err2)
		}
		how = "/proc remounted hidepid"
	}
	return how, nil
}

// cover hides p in the calling thread's mount namespace: an empty
// read-only tmpfs over a directory, /dev/null over a file. A path that does
// not exist has nothing to hide.
func cover(p string) error {
	st, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hide %s: %w", p, err)
	}
	if st.IsDir() {
		err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=000")
	} else if err = unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err == nil {
		err = unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "") // a device on purpose: reads empty
	}
	if err != nil {
		return fmt.Errorf("hide %s: %w", p, err)
	}
	return nil
}

// hidden cleans Config.Hide: absolute, and none that holds the pods' work
// directory (the pods would lose it).
func hidden(paths []string, work string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("local runner: hide %q: %w", p, err)
		}
		if a == "/" || work == a || strings.HasPrefix(work, a+string(filepath.Separator)) {
			return nil, fmt.Errorf("local runner: hide %q: it holds the pods' work directory %s", p, work)
		}
		out = append(out, a)
	}
	return out, nil
}
