package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/runwayhq/runway/services/nodemanager"
)

// Labels and annotations Runway puts on (or reads from) Kubernetes objects.
const (
	// SchedulerName is the spec.schedulerName of the pods Runway places.
	SchedulerName = "runway"
	// LabelProject names the pod's project; on a user's pod it asks Runway
	// to schedule the pod as a workload of that project.
	LabelProject = "runway.io/project"
	// LabelWorkload names the workload id of a pod Runway created.
	LabelWorkload = "runway.io/workload"
	// LabelPodIndex is the pod's index in its workload's gang.
	LabelPodIndex = "runway.io/pod-index"
	// LabelNodePool on a Node names its pool outright (otherwise the pools'
	// selectors choose).
	LabelNodePool = "runway.io/node-pool"
	// LabelGPUProduct and LabelGPUMemory are GPU feature discovery's labels
	// (memory in MiB).
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUMemory  = "nvidia.com/gpu.memory"
	// ResourceGPU is the device plugin's resource.
	ResourceGPU = "nvidia.com/gpu"
	// AnnotationBinding is the key of the binding a pod runs (below
	// bindings/), and AnnotationBindingRev its create revision: a pod whose
	// binding is gone, or was created again, is deleted.
	AnnotationBinding    = "runway.io/binding"
	AnnotationBindingRev = "runway.io/binding-revision"
	// AnnotationGPUFraction on a user's pod asks for a share of one GPU
	// (0 < f < 1) instead of nvidia.com/gpu devices.
	AnnotationGPUFraction = "gpu-fraction"
	// AnnotationDevices on a pod in Runway's namespace lists the Runway
	// device indexes it holds (comma-separated): a device stays taken
	// until every pod that names it is gone, terminating ones included.
	AnnotationDevices = "runway.io/devices"
	// AnnotationFractionMilli on a pod of a fraction is its share of each
	// device; fractions on one device share its reservation pod.
	AnnotationFractionMilli = "runway.io/fraction-milli"
	// LabelReservation marks the reservation pod that owns one physical GPU
	// for the fractions on it.
	LabelReservation = "runway.io/gpu-reservation"
	// AnnotationGPUUUID on a reservation pod is the UUID of the device the
	// device plugin gave it, reported from inside the pod (its
	// NVIDIA_VISIBLE_DEVICES); the fractions on that GPU get it.
	AnnotationGPUUUID = "runway.io/gpu-uuid"
	// AnnotationEndedByAgent on one of Runway's pods says why the node
	// agent (Kubernetes mode) killed it, for example over its GPU memory
	// slice: the runtime reports the pod FAILED with it.
	AnnotationEndedByAgent = "runway.io/ended-by-agent"
	// AnnotationGPUIdleSeconds on one of Runway's pods is its GPU idle time
	// as the node agent measures it, in whole seconds: the runtime puts it
	// in the pod's run reports.
	AnnotationGPUIdleSeconds = "runway.io/gpu-idle-seconds"
	// AnnotationAgentReportMAC signs the two above and when the agent
	// wrote them (Marks.SignAgentReport): only signed findings count, and
	// only ones newer than the last that counted, since the pod's users may
	// write its annotations too.
	AnnotationAgentReportMAC = "runway.io/agent-report-mac"
)

// NodeID is the Runway node id of the Kubernetes node name (what the node
// agent on it goes by): see nodeID.
func NodeID(name string) string { return nodeID(name) }

// nodeID is the Runway node id of a Kubernetes node: its name lower-cased
// with every character outside [a-z0-9-] (a DNS name's dots) made '-', cut
// to 63; "" when nothing usable is left.
func nodeID(name string) string {
	id := []byte(strings.ToLower(name))
	for i, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			id[i] = '-'
		}
	}
	s := strings.Trim(string(id[:min(len(id), 63)]), "-")
	if !nodemanager.ValidNodeID(s) {
		return ""
	}
	return s
}

// legacyPodName is the name a binding's pod had in Runway's namespace
// before pods moved to their projects' namespaces (mark.go's podName).
func legacyPodName(b nodemanager.Binding, rev int64) string {
	base := b.Workload + "-" + strconv.Itoa(b.Pod)
	return trimName(base, 63-9) + "-" + shortHash(b.Node+"/"+strconv.FormatInt(rev, 10))
}

// reservationName is the name of the reservation pod of device d on the
// Kubernetes node: one per device, so a second cannot be created while
// the first is still terminating.
// ReservationName is the name of the reservation pod (in Runway's
// namespace) of Runway device index d on the Kubernetes node.
func ReservationName(node string, d int) string { return reservationName(node, d) }

func reservationName(node string, d int) string {
	return "gpu-" + trimName(nodeID(node), 40) + "-" + strconv.Itoa(d) + "-" + shortHash(node+"/"+strconv.Itoa(d))
}

// foreignWorkloadID is the workload id of a user's pod: its name made an
// id, with a hash of its uid (names are reused; uids are not).
func foreignWorkloadID(name, uid string) string {
	id := []byte(strings.ToLower(name))
	for i, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			id[i] = '-'
		}
	}
	base := trimName(strings.Trim(string(id), "-"), 40)
	if base == "" {
		base = "pod"
	}
	return base + "-" + shortHash(uid)
}

func trimName(s string, n int) string {
	return strings.TrimRight(s[:min(len(s), n)], "-")
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}
