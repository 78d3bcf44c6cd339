package container

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"

	"github.com/runwayhq/runway/pkg/policy"
	"github.com/runwayhq/runway/pkg/runner"
)

// podUser is the uid and gid a pod's container runs as: root only where a
// policy allowed it (spec.RunAsRoot); else the image's user when the image
// names a non-root uid by number (a name could be root in the image's
// /etc/passwd: as Kubernetes' runAsNonRoot, only a number is known not to
// be); else its project's.
func podUser(spec runner.Spec, imageUser string) (uid, gid uint32) {
	if spec.RunAsRoot {
		return 0, 0
	}
	u, g, _ := strings.Cut(imageUser, ":")
	if n, err := strconv.ParseUint(u, 10, 32); err == nil && n > 0 && n < 1<<32-1 {
		uid, gid = uint32(n), uint32(n)
		if m, err := strconv.ParseUint(g, 10, 32); err == nil && m > 0 && m < 1<<32-1 {
			gid = uint32(m)
		}
		return uid, gid
	}
	id := runner.ProjectUID(spec.Project)
	return id, id
}

// hostConfig is the host side of a pod's container: its limits, its work
// directory and its GPUs, and nothing else of the node. Every capability
// is dropped but those a policy allowed (spec.AddCapabilities); no new
// privileges (setuid binaries gain nothing); the engine's default seccomp
// profile and masked paths (never unconfined, never privileged); its own
// pid, ipc, uts and cgroup namespaces; the network mode given (the
// project's network).
func (r *Runner) hostConfig(spec runner.Spec, work, network string) (*container.HostConfig, error) {
	for _, c := range spec.AddCapabilities {
		if !policy.Capability(c) {
			return nil, fmt.Errorf("capability %q is not one a policy can allow", c)
		}
	}
	pids := int64(PidsLimit)
	host := &container.HostConfig{
		Binds:        []string{work + ":" + work},
		NetworkMode:  container.NetworkMode(network),
		CapDrop:      []string{"ALL"},
		CapAdd:       append([]string(nil), spec.AddCapabilities...),
		SecurityOpt:  []string{"no-new-privileges"},
		IpcMode:      container.IPCModePrivate,
		CgroupnsMode: container.CgroupnsModePrivate,
		Resources: container.Resources{Memory: spec.MemoryBytes, NanoCPUs: spec.MilliCPU * 1_000_000,
			PidsLimit: &pids},
	}
	if spec.MemoryBytes > 0 {
		host.MemorySwap = spec.MemoryBytes // no swap: over the limit is out of memory
	}
	if len(spec.CDIDevices) > 0 {
		if r.podman {
			for _, d := range spec.CDIDevices {
				host.Devices = append(host.Devices, container.DeviceMapping{PathOnHost: d, PathInContainer: d, CgroupPermissions: "rwm"})
			}
		} else {
			host.DeviceRequests = []container.DeviceRequest{{Driver: "cdi", DeviceIDs: spec.CDIDevices}}
		}
	}
	return host, nil
}

// User namespaces (podman 4 and later; dockerd maps users only daemon-wide,
// with userns-remap). A pod's container gets a user namespace of its
// project's: its uids 0-65535 are the host's uids from its project's
// base (ProjectHostBase, far above any account and apart from
// runner.ProjectUIDs), and the uid it runs as, when above that range (its
// project's uid), is the same uid on the host, so that its work directory
// and the processes the agent follows keep their owner. So root in the
// container (where a policy allows it) and every uid the image's files
// are owned by are unprivileged uids on the host. Podman's "auto" mode
// with explicit mappings needs no /etc/subuid range; the storage gives
// the image's files to the mapped uids (a copy of its layers per project
// where the storage driver cannot map them).
const userNSSize = 65536

// ProjectHostRanges are the host uid ranges of projects' user namespaces:
// Count ranges of 65536 uids from First, one per project by a hash of its
// id (two projects share one by a collision, 1 in 30,000 per pair).
var ProjectHostRanges = struct{ First, Count uint32 }{First: 2_200_000_000, Count: 30_000}

// ProjectHostBase is the host uid of uid 0 in project's containers.
func ProjectHostBase(project string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte("userns/" + project))
	return ProjectHostRanges.First + h.Sum32()%ProjectHostRanges.Count*userNSSize
}

// userNS is the user namespace mode of a pod of project that runs as uid
// and gid in its container ("" without user namespaces: the host's), and
// the host's uid and gid they are.
func (r *Runner) userNS(project string, uid, gid uint32) (mode string, hostUID, hostGID uint32) {
	if !r.userns {
		return "", uid, gid
	}
	base := ProjectHostBase(project)
	mode = fmt.Sprintf("auto:uidmapping=0:%d:%d,gidmapping=0:%d:%d", base, userNSSize, base, userNSSize)
	hostUID, hostGID = base+uid, base+gid
	if uid >= userNSSize {
		mode += fmt.Sprintf(",uidmapping=%d:%d:1", uid, uid)
		hostUID = uid
	}
	if gid >= userNSSize {
		mode += fmt.Sprintf(",gidmapping=%d:%d:1", gid, gid)
		hostGID = gid
	}
	return mode + fmt.Sprintf(",size=%d", userNSSize), hostUID, hostGID
}
