package container

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/runwayhq/runway/pkg/runner"
)

// credentialFiles writes a pod's credential files under its record
// directory (root's, 0700: no pod reaches it), one directory per directory
// the pod sees, owned by the pod's uid, the files 0400; and returns their
// read-only bind mounts. Remove deletes them with the record directory.
func credentialFiles(files []runner.File, rec string, uid, gid uint32) ([]string, error) {
	if len(files) == 0 {
		return nil, nil
	}
	byDir := map[string][]runner.File{}
	for _, f := range files {
		byDir[filepath.Dir(f.Path)] = append(byDir[filepath.Dir(f.Path)], f)
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	root := filepath.Join(rec, "credentials")
	if err := os.RemoveAll(root); err != nil { // a start again after a crash writes them anew
		return nil, fmt.Errorf("credential files: %w", err)
	}
	var binds []string
	for i, dir := range dirs {
		src := filepath.Join(root, strconv.Itoa(i))
		if err := os.MkdirAll(src, 0o700); err != nil {
			return nil, fmt.Errorf("credential files: %w", err)
		}
		for _, f := range byDir[dir] {
			p := filepath.Join(src, filepath.Base(f.Path))
			if err := os.WriteFile(p, f.Data, 0o400); err != nil {
				return nil, fmt.Errorf("credential files: %w", err)
			}
			if err := os.Chown(p, int(uid), int(gid)); err != nil {
				return nil, fmt.Errorf("credential files: %w", err)
			}
		}
		if err := os.Chown(src, int(uid), int(gid)); err != nil {
			return nil, fmt.Errorf("credential files: %w", err)
		}
		if err := os.Chmod(src, 0o500); err != nil {
			return nil, fmt.Errorf("credential files: %w", err)
		}
		binds = append(binds, src+":"+dir+":ro")
	}
	return binds, nil
}
