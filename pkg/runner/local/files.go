package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/runwayhq/runway/pkg/runner"
)

// errNoFiles: without its mount namespace (an agent not root) a pod's
// credential files would land on the node's shared filesystem.
var errNoFiles = errors.New("credential files need the process runtime running as root (each pod's mount namespace) or the container runtime")

// filesSetup puts a pod's credential files in place inside its mount
// namespace: each directory gets a tmpfs of its own there (so the values
// never reach the node's disk and no other process sees them), owned by the
// pod's user, the files mode 0400, then the tmpfs is made read-only. The
// directory must exist in the pod's view (a tmpfs over it hides only what
// the pod itself would see there). nil when there are no files.
func filesSetup(files []runner.File, cred *syscall.Credential) func() error {
	if len(files) == 0 {
		return nil
	}
	uid, gid := os.Getuid(), os.Getgid()
	if cred != nil {
		uid, gid = int(cred.Uid), int(cred.Gid)
	}
	byDir := map[string][]runner.File{}
	for _, f := range files {
		dir := filepath.Dir(f.Path)
		byDir[dir] = append(byDir[dir], f)
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return func() error {
		for _, dir := range dirs {
			// The mount point must exist: a tenant's path must not make
			// directories on the node's own filesystem.
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return fmt.Errorf("credential files at %s: the process runtime mounts them on a directory the node has, and it has no %s; name one it has (such as /mnt), or run on the container runtime", dir, dir)
			}
			opts := fmt.Sprintf("size=1m,mode=0500,uid=%d,gid=%d", uid, gid)
			if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
				return fmt.Errorf("credential files: mount a tmpfs on %s: %w", dir, err)
			}
			for _, f := range byDir[dir] {
				if err := os.WriteFile(f.Path, f.Data, 0o400); err != nil {
					return fmt.Errorf("credential files: %w", err)
				}
				if err := os.Chown(f.Path, uid, gid); err != nil {
					return fmt.Errorf("credential files: %w", err)
				}
			}
		}
		// Read-only once written; children's tmpfs mounts stay writable
		// only until their own remount, which follows in order.
		for _, dir := range dirs {
			if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, fmt.Sprintf("size=1m,mode=0500,uid=%d,gid=%d", uid, gid)); err != nil {
				return fmt.Errorf("credential files: make %s read-only: %w", dir, err)
			}
		}
		return nil
	}
}
