package container

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"

	"github.com/runwayhq/runway/pkg/runner"
)

// The host side of every pod's container: all capabilities dropped, no new
// privileges, the engine's seccomp profile, private namespaces, no device
// but its GPUs, no host path but its work directory, the network given.
func TestHostConfig_dropsRootsReach(t *testing.T) {
	for _, podman := range []bool{true, false} {
		r := &Runner{podman: podman}
		spec := runner.Spec{ID: "u.0", Project: "team-a", CDIDevices: []string{"nvidia.com/gpu=GPU-1"}, MemoryBytes: 1 << 30}
		h, err := r.hostConfig(spec, "/w/u.0", "runway-x-team-a")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(h.CapDrop, []string{"ALL"}) || len(h.CapAdd) != 0 {
			t.Errorf("CapDrop %v CapAdd %v, want ALL and none", h.CapDrop, h.CapAdd)
		}
		if h.Privileged || h.PublishAllPorts {
			t.Errorf("privileged %v, publish all %v", h.Privileged, h.PublishAllPorts)
		}
		if !slices.Equal(h.SecurityOpt, []string{"no-new-privileges"}) {
			t.Errorf("SecurityOpt %v, want only no-new-privileges (the engine's seccomp and LSM defaults)", h.SecurityOpt)
		}
		for _, o := range h.SecurityOpt {
			if strings.Contains(o, "unconfined") || strings.Contains(o, "disable") {
				t.Errorf("SecurityOpt %q loosens the engine's defaults", o)
			}
		}
		if h.PidMode.IsHost() || h.IpcMode != container.IPCModePrivate || h.UTSMode.IsHost() || h.UsernsMode.IsHost() ||
			h.CgroupnsMode != container.CgroupnsModePrivate || h.NetworkMode != "runway-x-team-a" {
			t.Errorf("namespaces: pid %q ipc %q uts %q userns %q cgroup %q network %q", h.PidMode, h.IpcMode, h.UTSMode, h.UsernsMode, h.CgroupnsMode, h.NetworkMode)
		}
		if !slices.Equal(h.Binds, []string{"/w/u.0:/w/u.0"}) || len(h.Mounts) != 0 || len(h.VolumesFrom) != 0 {
			t.Errorf("host paths: binds %v mounts %v volumes from %v, want the work directory only", h.Binds, h.Mounts, h.VolumesFrom)
		}
		if podman {
			if len(h.Devices) != 1 || h.Devices[0].PathOnHost != "nvidia.com/gpu=GPU-1" || len(h.DeviceRequests) != 0 {
				t.Errorf("podman devices %+v requests %+v, want the pod's GPU only", h.Devices, h.DeviceRequests)
			}
		} else if len(h.Devices) != 0 || len(h.DeviceRequests) != 1 || !slices.Equal(h.DeviceRequests[0].DeviceIDs, spec.CDIDevices) {
			t.Errorf("dockerd devices %+v requests %+v, want the pod's GPU only", h.Devices, h.DeviceRequests)
		}
		if len(h.DeviceCgroupRules) != 0 || len(h.Sysctls) != 0 || len(h.ExtraHosts) != 0 || len(h.PortBindings) != 0 {
			t.Errorf("extras: cgroup rules %v sysctls %v hosts %v ports %v", h.DeviceCgroupRules, h.Sysctls, h.ExtraHosts, h.PortBindings)
		}
		if h.Memory != 1<<30 || h.MemorySwap != 1<<30 || h.PidsLimit == nil || *h.PidsLimit != PidsLimit {
			t.Errorf("limits: memory %d swap %d pids %v", h.Memory, h.MemorySwap, h.PidsLimit)
		}
	}
	r := &Runner{podman: true}
	h, err := r.hostConfig(runner.Spec{ID: "u.0", AddCapabilities: []string{"NET_RAW"}}, "/w", NetworkNone)
	if err != nil || !slices.Equal(h.CapAdd, []string{"NET_RAW"}) || !slices.Equal(h.CapDrop, []string{"ALL"}) {
		t.Errorf("with NET_RAW allowed: CapAdd %v CapDrop %v err %v", h.CapAdd, h.CapDrop, err)
	}
	for _, bad := range []string{"ALL", "CAP_SYS_ADMIN", "net_raw", ""} {
		if _, err := r.hostConfig(runner.Spec{ID: "u.0", AddCapabilities: []string{bad}}, "/w", NetworkNone); err == nil {
			t.Errorf("capability %q was added", bad)
		}
	}
}

// A pod runs as its project's uid, as its image's user only when that is a
// number other than 0, as root only when a policy allowed it.
func TestPodUser(t *testing.T) {
	a, b := runner.ProjectUID("team-a"), runner.ProjectUID("team-b")
	if a == b || a < runner.ProjectUIDs.First || a >= runner.ProjectUIDs.First+runner.ProjectUIDs.Count || a != runner.ProjectUID("team-a") {
		t.Errorf("project uids %d, %d: want two stable uids in the range", a, b)
	}
	spec := runner.Spec{Project: "team-a"}
	for image, want := range map[string][2]uint32{
		"": {a, a}, "root": {a, a}, "0": {a, a}, "0:0": {a, a}, "app": {a, a}, "app:app": {a, a},
		"1000": {1000, 1000}, "1000:0": {1000, 1000}, "1000:2000": {1000, 2000}, "1000:staff": {1000, 1000},
		"4294967295": {a, a}, "-1": {a, a},
	} {
		if uid, gid := podUser(spec, image); [2]uint32{uid, gid} != want {
			t.Errorf("image user %q: %d:%d, want %d:%d", image, uid, gid, want[0], want[1])
		}
	}
	spec.RunAsRoot = true
	if uid, gid := podUser(spec, "1000"); uid != 0 || gid != 0 {
		t.Errorf("allowed root: %d:%d", uid, gid)
	}
}

// On podman a pod's user namespace maps its uids 0-65535 to its
// project's host range and the project's uid (or an image's uid above the
// range) to itself; the work directory goes to the host's uid of the
// pod's. Without user namespaces (dockerd) the uid is the host's.
func TestUserNS(t *testing.T) {
	a, b := ProjectHostBase("team-a"), ProjectHostBase("team-b")
	end := uint64(ProjectHostRanges.First) + uint64(ProjectHostRanges.Count)*userNSSize
	for _, base := range []uint32{a, b} {
		if base < ProjectHostRanges.First || uint64(base)+userNSSize > end || end > 1<<32-1 ||
			(base-ProjectHostRanges.First)%userNSSize != 0 {
			t.Errorf("host base %d is not a range of its own in [%d, %d)", base, ProjectHostRanges.First, end)
		}
	}
	if a == b || a != ProjectHostBase("team-a") {
		t.Errorf("host bases %d, %d: want two stable ones", a, b)
	}
	if uint64(runner.ProjectUIDs.First)+uint64(runner.ProjectUIDs.Count) > uint64(ProjectHostRanges.First) {
		t.Error("project uids overlap the user namespaces' host ranges")
	}
	r := &Runner{podman: true, userns: true}
	pu := runner.ProjectUID("team-a")
	for _, tc := range []struct {
		uid, gid, hostUID, hostGID uint32
		mode                       string
	}{
		{pu, pu, pu, pu, fmt.Sprintf("auto:uidmapping=0:%d:65536,gidmapping=0:%d:65536,uidmapping=%d:%d:1,gidmapping=%d:%d:1,size=65536", a, a, pu, pu, pu, pu)},
		{0, 0, a, a, fmt.Sprintf("auto:uidmapping=0:%d:65536,gidmapping=0:%d:65536,size=65536", a, a)},
		{1000, 70000, a + 1000, 70000, fmt.Sprintf("auto:uidmapping=0:%d:65536,gidmapping=0:%d:65536,gidmapping=70000:70000:1,size=65536", a, a)},
	} {
		mode, hu, hg := r.userNS("team-a", tc.uid, tc.gid)
		if mode != tc.mode || hu != tc.hostUID || hg != tc.hostGID {
			t.Errorf("userNS(%d:%d) = %q, %d:%d; want %q, %d:%d", tc.uid, tc.gid, mode, hu, hg, tc.mode, tc.hostUID, tc.hostGID)
		}
	}
	if mode, hu, hg := (&Runner{}).userNS("team-a", 0, 0); mode != "" || hu != 0 || hg != 0 {
		t.Errorf("without user namespaces: %q, %d:%d; want the host's uid", mode, hu, hg)
	}
}
