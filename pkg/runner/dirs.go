package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Dirs are a runner's own directories.
type Dirs struct {
	// Data is the runner's (0700): pods' logs and records, never theirs.
	Data string
	// Work holds the pods' working directories (0711: pods may cross it,
	// not list it), outside Data.
	Work string
	// Name is a hash of Data: what names the runner's own things (its
	// default work directory, its cgroup, its containers).
	Name string
}

// Name names the runner of the absolute data directory dataDir.
func Name(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return hex.EncodeToString(sum[:6])
}

// DefaultWorkDir is the work directory of the runner of dataDir when none
// is given: os.TempDir()/<kind>/<its Name>.
func DefaultWorkDir(dataDir, kind string) string {
	if abs, err := filepath.Abs(dataDir); err == nil {
		dataDir = abs
	}
	return filepath.Join(os.TempDir(), kind, Name(dataDir))
}

// MakeDirs makes a runner's directories, absolute and owned by its user:
// data, and work (DefaultWorkDir(data, kind) when empty), which must not
// be inside data.
func MakeDirs(data, work, kind string) (Dirs, error) {
	data, err := filepath.Abs(data)
	if err != nil {
		return Dirs{}, err
	}
	if work == "" {
		work = DefaultWorkDir(data, kind)
		if err := PrivateDir(filepath.Dir(work), 0o711); err != nil {
			return Dirs{}, fmt.Errorf("work directory: %w", err)
		}
	}
	if work, err = filepath.Abs(work); err != nil {
		return Dirs{}, err
	}
	if work == data || strings.HasPrefix(work, data+string(filepath.Separator)) {
		return Dirs{}, fmt.Errorf("the work directory %s is inside the data directory %s", work, data)
	}
	if err := PrivateDir(data, 0o700); err != nil {
		return Dirs{}, fmt.Errorf("data directory: %w", err)
	}
	if err := PrivateDir(work, 0o711); err != nil {
		return Dirs{}, fmt.Errorf("work directory: %w", err)
	}
	return Dirs{Data: data, Work: work, Name: Name(data)}, nil
}

// PrivateDir makes dir (and its parents) owned by the runner, with mode;
// it fails when dir exists as a link or belongs to someone else (another
// user of a shared /tmp must not have prepared it).
func PrivateDir(dir string, mode fs.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok || int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%s is not a directory of this user", dir)
	}
	return os.Chmod(dir, mode)
}
