package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/runwayhq/runway/pkg/runner"
)

// errNoMounts: without its mount namespace (an agent not root) a pod's
// data sources cannot be bound where it looks for them.
var errNoMounts = errors.New("data sources need the process runtime running as root (each pod's mount namespace) or the container runtime")

// checkMounts refuses what the process runtime does not mount (NFS: the
// container runtime or Kubernetes mode does) and a node directory that is
// missing, and gives a directory made for the pod (a clone) to its user.
func checkMounts(mounts []runner.Mount, cred *syscall.Credential) error {
	for _, m := range mounts {
		if m.NFSServer != "" {
			return fmt.Errorf("data source at %s: the process runtime mounts no NFS export; use the container runtime or Kubernetes mode", m.Target)
		}
		if st, err := os.Stat(m.HostPath); err != nil || !st.IsDir() {
			return fmt.Errorf("data source at %s: the node has no directory %s", m.Target, m.HostPath)
		}
		if m.Owned && cred != nil {
			err := filepath.WalkDir(m.HostPath, func(p string, _ fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, int(cred.Uid), int(cred.Gid))
			})
			if err != nil {
				return fmt.Errorf("data source at %s: %w", m.Target, err)
			}
		}
	}
	return nil
}

// mountsSetup binds a pod's data sources in its mount namespace, before
// Config.Hide is covered there (a clone lives in the record directory,
// which the pod must not see otherwise): each at its target, which must
// exist in the pod's view (a tenant's path must not make directories on
// the node), read-only when asked. nil when there are none.
func mountsSetup(mounts []runner.Mount) func() error {
	if len(mounts) == 0 {
		return nil
	}
	return func() error {
		for _, m := range mounts {
			if st, err := os.Stat(m.Target); err != nil || !st.IsDir() {
				return fmt.Errorf("data source at %s: the process runtime mounts it on a directory the node has, and it has no %s; name one it has (such as /mnt), or run on the container runtime", m.Target, m.Target)
			}
			if err := unix.Mount(m.HostPath, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("data source at %s: bind %s: %w", m.Target, m.HostPath, err)
			}
			if m.ReadOnly {
				if err := unix.Mount("", m.Target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
					return fmt.Errorf("data source at %s: make it read-only: %w", m.Target, err)
				}
			}
		}
		return nil
	}
}
