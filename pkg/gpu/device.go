package gpu

import "time"

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
