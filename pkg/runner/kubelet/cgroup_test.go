package kubelet_test

import (
	"testing"

	"github.com/runwayhq/runway/pkg/runner/kubelet"
)

const uid = "3f1c2a4b-5d6e-4f70-8a9b-0c1d2e3f4a5b"

// Both cgroup drivers' paths name the pod, on the unified line or a v1
// controller's, from the root or from another cgroup namespace; nothing
// else does.
func TestPodUID(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string
	}{
		{"cgroupfs v2 burstable", "0::/kubepods/burstable/pod" + uid + "/0123abcd\n", uid},
		{"cgroupfs v2 guaranteed", "0::/kubepods/pod" + uid + "/0123abcd\n", uid},
		{"systemd v2 besteffort", "0::/kubepods.slice/kubepods-besteffort.slice/" +
			"kubepods-besteffort-pod3f1c2a4b_5d6e_4f70_8a9b_0c1d2e3f4a5b.slice/cri-containerd-0123.scope\n", uid},
		{"systemd v2 guaranteed", "0::/kubepods.slice/kubepods-pod3f1c2a4b_5d6e_4f70_8a9b_0c1d2e3f4a5b.slice/crio-0123.scope\n", uid},
		{"systemd, another cgroup namespace", "0::/../../kubepods-burstable.slice/" +
			kubelet.SystemdSegment("burstable", uid) + "/cri-containerd-0123.scope\n", uid},
		{"cgroupfs v1 hybrid", "12:freezer:/kubepods/besteffort/pod" + uid + "/abcd\n11:cpu,cpuacct:/kubepods/besteffort/pod" + uid + "/abcd\n0::/\n", uid},
		{"static pod hash", "0::/kubepods/burstable/pod6b3d0a3f2c7d4f4e6dfb1c4f1b3a1c2d/abcd\n", "6b3d0a3f2c7d4f4e6dfb1c4f1b3a1c2d"},
		{"under a test root", "0::/runway-test-1/kubepods.slice/kubepods-burstable.slice/" + kubelet.SystemdSegment("burstable", uid) + "/c.scope\n", uid},
		{"host process", "0::/system.slice/containerd.service\n", ""},
		{"the QoS slice only", "0::/kubepods.slice/kubepods-burstable.slice\n", ""},
		{"not a UID", "0::/kubepods/burstable/podcast/abcd\n", ""},
		{"upper-case hex", "0::/kubepods/pod3F1C2A4B-5D6E-4F70-8A9B-0C1D2E3F4A5B/x\n", ""},
		{"dashes misplaced", "0::/kubepods/pod3f1c2a4b5-d6e-4f70-8a9b-0c1d2e3f4a5b/x\n", ""},
		{"a slice not the kubelet's", "0::/user.slice/user-pod" + uid + ".slice\n", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := kubelet.PodUID(tc.file)
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("PodUID(%q) = %q, %v; want %q", tc.file, got, ok, tc.want)
			}
		})
	}
}
