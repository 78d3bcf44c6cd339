package simulated

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runwayhq/runway/pkg/gpu"
)

// Defaults used when a Config field is zero.
const (
	DefaultModel       = "NVIDIA H100 80GB HBM3 (simulated)"
	DefaultMemoryBytes = 80 << 30
)

// MemoryFile is the file in a pod's directory where the pod declares the
// GPU memory it uses, a decimal number of bytes; EnvMemoryFile gives the
// pod its path.
const (
	MemoryFile    = "gpu-memory-bytes"
	EnvMemoryFile = "RUNWAY_GPU_MEMORY_FILE"
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
	// UUID names device i (GPU-sim-{Node}-{i} when nil): a test gives the
	// devices the UUIDs its stand-in device plugin hands out.
	UUID func(i int) string
}

// Backend is a fixed set of simulated devices. It is safe for concurrent
// use.
type Backend struct {
	devices []gpu.DeviceInfo

	gpu.Faults // injected (InjectXID)

	mu   sync.Mutex
	last map[cpuKey]cpuSample // previous sample per device and pod
}

type cpuKey struct {
	index int
	pod   string
}

type cpuSample struct {
	cpu time.Duration
	at  time.Time
}

var (
	_ gpu.Backend = (*Backend)(nil)
	_ gpu.Health  = (*Backend)(nil)
)

// InjectXID makes device index raise xid, as a driver would: an XID that
// marks a device unhealthy does so from now on (Unhealthy). It reports
// whether the device is now unhealthy.
func (b *Backend) InjectXID(index int, xid uint64) bool {
	why, fault := gpu.XIDFault(xid)
	if !fault || index < 0 || index >= len(b.devices) {
		return false
	}
	b.Mark(index, why)
	return true
}

// New returns a backend with cfg.Count devices.
func New(cfg Config) *Backend {
	if cfg.Model == "" {
		cfg.Model = DefaultModel
	}
	if cfg.MemoryBytes == 0 {
		cfg.MemoryBytes = DefaultMemoryBytes
	}
	b := &Backend{devices: make([]gpu.DeviceInfo, cfg.Count), last: map[cpuKey]cpuSample{}}
	for i := range b.devices {
		b.devices[i] = gpu.DeviceInfo{
			Index:       i,
			UUID:        fmt.Sprintf("GPU-sim-%s-%d", cfg.Node, i),
			Model:       cfg.Model,
			MemoryBytes: cfg.MemoryBytes,
		}
		if cfg.UUID != nil {
			b.devices[i].UUID = cfg.UUID(i)
		}
	}
	return b
}

// Devices returns a copy of the devices, ordered by index.
func (b *Backend) Devices() ([]gpu.DeviceInfo, error) {
	return append([]gpu.DeviceInfo(nil), b.devices...), nil
}

// PodEnv gives the pod the path of its memory declaration.
func (b *Backend) PodEnv(dir string) []string {
	return []string{EnvMemoryFile + "=" + filepath.Join(dir, MemoryFile)}
}

// Sample reads the pods' declared memory and CPU time (see the package
// comment). Samples of groups not given are forgotten.
func (b *Backend) Sample(index int, pods []gpu.Pod) (gpu.DeviceUsage, error) {
	if index < 0 || index >= len(b.devices) {
		return gpu.DeviceUsage{}, fmt.Errorf("simulated GPU %d: no such device (%d devices)", index, len(b.devices))
	}
	now := time.Now()
	u := gpu.DeviceUsage{Pods: make([]gpu.PodUsage, len(pods))}
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := map[cpuKey]bool{}
	for i, p := range pods {
		k := cpuKey{index, p.Key}
		keep[k] = true
		pu := &u.Pods[i]
		pu.MemoryBytes = declared(p.Dir)
		if prev, ok := b.last[k]; ok && now.After(prev.at) {
			pu.Utilization = min(max(float64(p.CPU-prev.cpu)/float64(now.Sub(prev.at)), 0), 1)
		}
		b.last[k] = cpuSample{cpu: p.CPU, at: now}
		u.MemoryUsedBytes += pu.MemoryBytes
		u.Utilization += pu.Utilization
	}
	for k := range b.last {
		if k.index == index && !keep[k] {
			delete(b.last, k)
		}
	}
	u.Utilization = min(u.Utilization, 1)
	return u, nil
}

// declared is the memory a pod declares in its MemoryFile; 0 when the
// file is missing or unreadable (a pod that declares nothing uses none).
func declared(dir string) int64 {
	if dir == "" {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(dir, MemoryFile))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
