package kubelet

import (
	"strings"
)

// PodUID is the UID of the Kubernetes pod whose cgroup a /proc/<pid>/cgroup
// file names (any of its lines: the unified hierarchy's "0::/path" or a v1
// controller's), and false for a process outside every pod.
func PodUID(cgroupFile string) (string, bool) {
	for line := range strings.Lines(cgroupFile) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		for seg := range strings.SplitSeq(f[2], "/") {
			if uid, ok := SegmentUID(seg); ok {
				return uid, true
			}
		}
	}
	return "", false
}

// SegmentUID is the pod UID of one cgroup path segment that names a pod:
// "pod<uid>" (cgroupfs driver) or "kubepods[-<qos>]-pod<uid_>.slice"
// (systemd driver, the UID's dashes written as underscores); false for
// any other segment (a QoS class, a container's scope).
func SegmentUID(seg string) (string, bool) {
	if rest, ok := strings.CutSuffix(seg, ".slice"); ok {
		i := strings.LastIndex(rest, "-pod")
		if !strings.HasPrefix(rest, "kubepods") || i < 0 {
			return "", false
		}
		return validUID(strings.ReplaceAll(rest[i+len("-pod"):], "_", "-"))
	}
	if rest, ok := strings.CutPrefix(seg, "pod"); ok {
		return validUID(rest)
	}
	return "", false
}

// validUID accepts a pod UID as the kubelet writes it: a UUID of lower-case
// hex digits, or the 32 hex digits (no dashes) of a static pod's hash.
func validUID(s string) (string, bool) {
	if len(s) != 36 && len(s) != 32 {
		return "", false
	}
	for i, c := range s {
		dash := len(s) == 36 && (i == 8 || i == 13 || i == 18 || i == 23)
		if dash != (c == '-') || !dash && (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return s, true
}

// SystemdSegment is the systemd driver's name of a pod's slice in QoS
// class qos ("" for guaranteed pods, "burstable", "besteffort"), as the
// kubelet names it (tests build cgroup trees with it).
func SystemdSegment(qos, uid string) string {
	prefix := "kubepods-"
	if qos != "" {
		prefix += qos + "-"
	}
	return prefix + "pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
}
