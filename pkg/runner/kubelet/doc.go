// Package kubelet finds the processes of the pods a kubelet runs on its
// node, so that the node agent's GPU manager can hold them to their GPU
// memory slices and time-slicing plans as it holds its own pods: it starts
// nothing (the kubelet does), it adopts pods by their cgroup.
//
//   - Which pod a process belongs to: /proc/<pid>/cgroup names the pod's
//     cgroup, and the kubelet names that after the pod's UID, in the
//     cgroupfs driver's form (kubepods/burstable/pod<uid>/<container>) or
//     the systemd driver's (kubepods-burstable-pod<uid_with_underscores>.slice).
//     The segment is found wherever it is in the path, so a reader in
//     another cgroup namespace ("/../../kubepods-…") reads it too. One walk
//     of the proc root (Node.Refresh) serves every pod.
//   - The pod's cgroup directory (for the freezer, cgroup.kill and
//     cpu.stat) is found by walking the cgroup root for the directory so
//     named: a cgroup v2 one (cgroup.freeze), else a v1 freezer one
//     (freezer.state). It is looked up once per pod.
//
// The proc and cgroup roots are configurable: a DaemonSet mounts the host's
// (hostPID, /sys/fs/cgroup), a test points them at a tree of its own.
package kubelet
