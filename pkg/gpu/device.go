package gpu

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

// Backend discovers a node's GPUs.
type Backend interface {
	// Devices lists the node's GPUs ordered by Index. A backend that cannot
	// read its devices (no driver) returns an error; a node without GPUs
	// returns an empty list.
	Devices() ([]DeviceInfo, error)
}
