package runner

import "hash/fnv"

// Project uids: a pod of the container and Kubernetes runtimes runs as its
// project's uid (and gid, so never in the root group), one of ProjectUIDs,
// unless a policy let it run as root. The range is far above any account
// of a host and apart from the process runtime's (local.DefaultUIDs); a
// project's uid is a hash of its id, so the same on every node, in every
// runtime and after every restart, and two projects share one only by a
// collision (1 in 100 million for two projects).
var ProjectUIDs = struct{ First, Count uint32 }{First: 2_010_000_000, Count: 100_000_000}

// ProjectUID is the uid (and gid) of project's pods.
func ProjectUID(project string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(project))
	return ProjectUIDs.First + h.Sum32()%ProjectUIDs.Count
}
