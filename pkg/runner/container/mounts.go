package container

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/runwayhq/runway/pkg/runner"
)

// dataBinds are the engine's bind specifications of a pod's data
// sources: a node directory (which must exist: the engine would make a
// missing one, root's, on the node) bound at its target, ":ro" when
// read-only; an NFS export as a volume of the engine's local driver
// (type nfs), one per pod and mount, removed with the pod. A directory
// made for the pod (a clone) is given to its host uid first.
func (r *Runner) dataBinds(ctx context.Context, id string, mounts []runner.Mount, uid, gid uint32) ([]string, error) {
	var binds []string
	for i, m := range mounts {
		src := m.HostPath
		switch {
		case m.NFSServer != "":
			name := r.volumeName(id, i)
			opts := "addr=" + m.NFSServer
			if m.ReadOnly {
				opts += ",ro"
			}
			vctx, cancel := context.WithTimeout(ctx, apiTimeout)
			_, err := r.cli.VolumeCreate(vctx, client.VolumeCreateOptions{Name: name, Driver: "local",
				DriverOpts: map[string]string{"type": "nfs", "o": opts, "device": ":" + m.NFSPath},
				Labels:     map[string]string{LabelRunner: r.name, LabelPodID: id}})
			cancel()
			if err != nil && !cerrdefs.IsConflict(err) {
				return nil, fmt.Errorf("data source at %s: the NFS volume for %s:%s: %w", m.Target, m.NFSServer, m.NFSPath, err)
			}
			src = name
		default:
			st, err := os.Stat(src)
			if err != nil || !st.IsDir() {
				return nil, fmt.Errorf("data source at %s: the node has no directory %s", m.Target, src)
			}
			if m.Owned {
				if err := chownTree(src, int(uid), int(gid)); err != nil {
					return nil, fmt.Errorf("data source at %s: %w", m.Target, err)
				}
			}
		}
		b := src + ":" + m.Target
		if m.ReadOnly {
			b += ":ro"
		}
		binds = append(binds, b)
	}
	return binds, nil
}

// volumeName is the engine volume of pod id's mount i.
func (r *Runner) volumeName(id string, i int) string {
	return r.containerName(id) + "-data-" + strconv.Itoa(i)
}

// removeVolumes removes pod id's NFS volumes (none: nothing to do).
func (r *Runner) removeVolumes(ctx context.Context, id string) error {
	list, err := r.cli.VolumeList(ctx, client.VolumeListOptions{Filters: client.Filters{}.Add("label", LabelPodID+"="+id).Add("label", LabelRunner+"="+r.name)})
	if err != nil {
		return fmt.Errorf("list pod %s's volumes: %w", id, err)
	}
	var errs []error
	for _, v := range list.Items {
		if _, err := r.cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove volume %s: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}

// chownTree gives dir and everything under it to uid:gid, links
// themselves (never what they point to).
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
