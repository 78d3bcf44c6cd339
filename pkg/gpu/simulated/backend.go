package simulated

import (
	"fmt"

	"github.com/runwayhq/runway/pkg/gpu"
)

// Defaults used when a Config field is zero.
const (
	DefaultModel       = "NVIDIA H100 80GB HBM3 (simulated)"
	DefaultMemoryBytes = 80 << 30
)

// Config describes the simulated devices: Count identical GPUs.
type Config struct {
	// Count is the number of devices; 0 is a node without GPUs.
	Count int
	// Model is every device's product name; DefaultModel when empty.
	Model string
	// MemoryBytes is every device's memory; DefaultMemoryBytes when 0.
	MemoryBytes int64
	// Node seeds the UUIDs so that devices of different simulated nodes
	// differ; may be empty.
	Node string
}

// Backend is a fixed set of simulated devices. It is immutable and safe
// for concurrent use.
type Backend struct {
	devices []gpu.DeviceInfo
}

var _ gpu.Backend = (*Backend)(nil)

// New returns a backend with cfg.Count devices.
func New(cfg Config) *Backend {
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = DefaultMemoryBytes
	}
	b := &Backend{devices: make([]gpu.DeviceInfo, cfg.Count)}
	for i := range b.devices {
		b.devices[i] = gpu.DeviceInfo{
			Index:       i,
			UUID:        fmt.Sprintf("GPU-sim-%s-%d", cfg.Node, i),
			Model:       cfg.Model,
			MemoryBytes: cfg.MemoryBytes,
		}
	}
	return b
}

// Devices returns a copy of the devices, ordered by index.
func (b *Backend) Devices() ([]gpu.DeviceInfo, error) {
	return append([]gpu.DeviceInfo(nil), b.devices...), nil
}
