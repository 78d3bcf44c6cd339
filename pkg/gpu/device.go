package gpu

import (
	"fmt"
	"maps"
	"sync"
	"time"
)

// DeviceInfo is one GPU as its backend discovered it.
type DeviceInfo struct {
	// Index is the device's index on its node (the NVML index), from 0; it
	// is what CUDA_VISIBLE_DEVICES names.
	Index int
	// UUID is the device UUID, for example "GPU-5f2c...".
	UUID string
	// Model is the product name, for example "NVIDIA H100 80GB HBM3".
	Model string
	// MemoryBytes is the total device memory.
	MemoryBytes int64
	// MIG reports MIG mode enabled: such a device is reported but not
	// offered to the scheduler in v1.
	MIG bool
}

// Pod is a pod the agent runs on a device, as Sample sees it. The agent
// reads every pod's processes once per sample (pkg/runner/local), so a
// backend never walks /proc itself.
type Pod struct {
	// Key names the pod across samples (its utilisation is a difference).
	Key string
	// Dir is the pod's working directory (the simulator reads the memory
	// the pod declares there).
	Dir string
	// CPU is the CPU time the pod's processes have used so far (the
	// simulator's utilisation).
	CPU time.Duration
	// Owns reports whether a process is one of the pod's (NVML lists
	// processes by pid); nil owns none.
	Owns func(pid int) bool
}

// PodUsage is one pod's use of one device.
type PodUsage struct {
	// MemoryBytes is the device memory the pod's processes hold.
	MemoryBytes int64
	// Utilization is the pod's share of the device's compute since the
	// previous sample, 0 to 1.
	Utilization float64
}

// DeviceUsage is one sample of a device.
type DeviceUsage struct {
	// Utilization is the share of time the device was busy, 0 to 1.
	Utilization float64
	// MemoryUsedBytes is the device memory in use, by anyone.
	MemoryUsedBytes int64
	// Pods are the usages of the pods given to Sample, in their order.
	Pods []PodUsage
}

// Backend discovers a node's GPUs and measures their use.
type Backend interface {
	// Devices lists the node's GPUs ordered by Index. A backend that cannot
	// read its devices (no driver) returns an error; a node without GPUs
	// returns an empty list.
	Devices() ([]DeviceInfo, error)
	// Sample measures device index and the share of it each of pods uses.
	// Utilisations are over the time since the previous Sample of the same
	// device and pod (0 at the first).
	Sample(index int, pods []Pod) (DeviceUsage, error)
	// PodEnv is the environment a pod working in dir gets from the
	// backend (KEY=VALUE), or nil.
	PodEnv(dir string) []string
}

// Health is a Backend that learns of device faults (NVML's XID events, a
// simulated injection): the agent asks it every sample and reports an
// unhealthy device as such, so that the scheduler places nothing on it.
type Health interface {
	// Unhealthy lists the devices found unhealthy so far, by index, with
	// why ("XID 79: GPU has fallen off the bus"); nil when all are well.
	Unhealthy() map[int]string
}

// Faults is the unhealthy devices a backend has seen, safe for concurrent
// use; a backend embeds it to implement Health.
type Faults struct {
	mu sync.Mutex
	m  map[int]string
}

// Mark records device index as unhealthy for why.
func (f *Faults) Mark(index int, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[int]string{}
	}
	f.m[index] = why
}

// Unhealthy implements Health.
func (f *Faults) Unhealthy() map[int]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.m)
}

// xidNames are the XIDs the agent names; others are reported by number.
var xidNames = map[uint64]string{
	48: "double-bit ECC error", 63: "ECC page retirement", 64: "ECC page retirement failure",
	74: "NVLink error", 79: "GPU has fallen off the bus", 92: "high single-bit ECC error rate",
	94: "contained ECC error", 95: "uncontained ECC error",
}

// applicationXIDs are raised by a program's own faults (illegal address,
// MMU fault of one context, a reset it asked for), not by the device: they
// leave it healthy, as NVIDIA's device plugin does.
var applicationXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

// XIDFault says why a device that raised xid is unhealthy, and false for
// an XID that leaves it healthy.
func XIDFault(xid uint64) (string, bool) {
	if applicationXIDs[xid] {
		return "", false
	}
	if name, ok := xidNames[xid]; ok {
		return fmt.Sprintf("XID %d: %s", xid, name), true
	}
	return fmt.Sprintf("XID %d", xid), true
}
