package local

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// DefaultUser is Config.User when it is empty.
const DefaultUser = "nobody"

// UIDRange is a range of user and group ids [First, Last] no account
// uses, from which each running pod gets one of its own.
type UIDRange struct{ First, Last uint32 }

// DefaultUIDs is the range the agent gives pods by default: far above any
// account or container sub-id range (2,000,000,000 + 100,000).
var DefaultUIDs = UIDRange{First: 2_000_000_000, Last: 2_000_099_999}

// ParseUIDRange reads "FIRST-LAST"; "" is the zero range (every pod runs
// as Config.User).
func ParseUIDRange(s string) (UIDRange, error) {
	if s == "" {
		return UIDRange{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.ParseUint(a, 10, 32)
	last, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil || first == 0 || last < first {
		return UIDRange{}, fmt.Errorf("uid range %q: want FIRST-LAST with 0 < FIRST <= LAST", s)
	}
	return UIDRange{First: uint32(first), Last: uint32(last)}, nil
}

// identities hands out the credentials pods run as. Only a root runner
// changes credentials; otherwise pods run as the runner does.
type identities struct {
	root     bool
	uid, gid uint32 // Config.User's, when no range is set
	ids      UIDRange
	mu       sync.Mutex
	used     map[uint32]bool
}

func newIdentities(name string, ids UIDRange) (*identities, error) {
	id := &identities{root: os.Geteuid() == 0, ids: ids, used: map[uint32]bool{}}
	if !id.root || ids.First != 0 {
		return id, nil
	}
	if name == "" {
		name = DefaultUser
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("local runner: user %q: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil || uid == 0 {
		return nil, fmt.Errorf("local runner: user %q must be an unprivileged account (uid %s)", name, u.Uid)
	}
	id.uid, id.gid = uint32(uid), uint32(gid)
	return id, nil
}

// take returns the credential of a new pod (nil when the runner is not
// root) and its uid, to give back with put.
func (id *identities) take(podID string) (*syscall.Credential, uint32, error) {
	if !id.root {
		return nil, 0, nil
	}
	if id.ids.First == 0 {
		return &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: []uint32{}}, id.uid, nil
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	n := uint64(id.ids.Last-id.ids.First) + 1
	h := fnv.New64a()
	h.Write([]byte(podID))
	start := h.Sum64() % n
	for i := range n {
		uid := id.ids.First + uint32((start+i)%n)
		if !id.used[uid] {
			id.used[uid] = true
			return &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}, uid, nil
		}
	}
	return nil, 0, fmt.Errorf("every uid of %d-%d is taken by a running pod", id.ids.First, id.ids.Last)
}

// reserve takes uid again for a pod an earlier runner started (0: none).
func (id *identities) reserve(uid uint32) {
	if id.ids.First == 0 || uid < id.ids.First || uid > id.ids.Last {
		return
	}
	id.mu.Lock()
	id.used[uid] = true
	id.mu.Unlock()
}

func (id *identities) put(uid uint32) {
	if id.ids.First == 0 {
		return
	}
	id.mu.Lock()
	delete(id.used, uid)
	id.mu.Unlock()
}

// disown gives a finished pod's working directory back to the runner
// (root), so that the next pod given the same uid cannot read it.
func disown(dir string) {
	if os.Geteuid() != 0 {
		return
	}
	_ = filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err == nil {
			_ = os.Lchown(path, 0, 0)
		}
		return nil
	})
	_ = os.Chmod(dir, 0o700)
}
