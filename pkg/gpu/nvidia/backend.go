//go:build cgo

package nvidia

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/runwayhq/runway/pkg/gpu"
)

// Backend reads devices through an NVML library. It is safe for
// concurrent use.
type Backend struct {
	lib nvml.Interface

	gpu.Faults // what WatchHealth saw

	mu       sync.Mutex
	lastSeen map[int]uint64 // per device, the newest process sample's timestamp
}

var (
	_ gpu.Backend = (*Backend)(nil)
	_ gpu.Health  = (*Backend)(nil)
)

// healthWait is how long one wait for NVML events lasts (ms): how soon
// WatchHealth sees its context end. A wait that fails otherwise than by
// timing out is retried after healthBackoff, doubling to healthMaxBackoff
// while it keeps failing, so a broken event set costs no CPU.
const (
	healthWait       = 1000
	healthBackoff    = 100 * time.Millisecond
	healthMaxBackoff = 10 * time.Second
)

// WatchHealth follows the devices' critical XID events (go-nvml's event
// set) until ctx is done: a device that raises an XID other than an
// application's own (gpu.XIDFault) is unhealthy from then on. It returns
// an error when NVML cannot give events at all, or no longer can (it was
// shut down, its driver or library went away).
func (b *Backend) WatchHealth(ctx context.Context) error {
	set, ret := b.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvml: event set: %w", ret)
	}
	defer set.Free()
	n, ret := b.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("nvml: device count: %w", ret)
	}
	byUUID := map[string]int{}
	for i := range n {
		d, err := b.device(i)
		if err != nil {
			return err
		}
		if uuid, ret := d.GetUUID(); ret == nvml.SUCCESS {
			byUUID[uuid] = i
		}
		// A device that cannot report XIDs (NOT_SUPPORTED) is watched no
		// further; the others still are.
		_ = d.RegisterEvents(nvml.EventTypeXidCriticalError, set)
	}
	var backoff time.Duration
	for ctx.Err() == nil {
		e, ret := set.Wait(healthWait)
		switch {
		case ret == nvml.SUCCESS, ret == nvml.ERROR_TIMEOUT:
			backoff = 0
		case waitEnded(ret):
			return fmt.Errorf("nvml: wait for events: %w", ret)
		default:
			backoff = min(max(2*backoff, healthBackoff), healthMaxBackoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			continue
		}
		if ret != nvml.SUCCESS || e.EventType != nvml.EventTypeXidCriticalError || e.Device == nil {
			continue // a timeout, or an event of no concern
		}
		why, fault := gpu.XIDFault(e.EventData)
		uuid, uret := e.Device.GetUUID()
		i, known := byUUID[uuid]
		if !fault || uret != nvml.SUCCESS || !known {
			continue
		}
		b.Mark(i, why)
	}
	return nil
}

// waitEnded: the event set can give no more events (NVML shut down, the
// set invalid, the driver or library gone); retrying would fail the same way.
func waitEnded(ret nvml.Return) bool {
	switch ret {
	case nvml.ERROR_UNINITIALIZED, nvml.ERROR_INVALID_ARGUMENT, nvml.ERROR_DRIVER_NOT_LOADED,
		nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_FUNCTION_NOT_FOUND:
		return true
	}
	return false
}

// Load loads the system's NVML library and initialises it; close shuts it
// down. It fails cleanly where the driver library is missing.
func Load() (b gpu.Backend, close func(), err error) {
	nb, err := New(nvml.New())
	if err != nil {
		return nil, nil, err
	}
	return nb, nb.Close, nil
}

// New initialises lib (the system library, or go-nvml's mock in tests).
func New(lib nvml.Interface) (*Backend, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: init: %w", ret)
	}
	return &Backend{lib: lib, lastSeen: map[int]uint64{}}, nil
}

// Close shuts NVML down.
func (b *Backend) Close() { _ = b.lib.Shutdown() }

// PodEnv is nil: NVML measures the processes themselves.
func (b *Backend) PodEnv(string) []string { return nil }

// CDIName is the device's CDI name (nvidia-ctk cdi generate's), by which
// docker and podman give a container this GPU and no other.
func (b *Backend) CDIName(d gpu.DeviceInfo) string { return "nvidia.com/gpu=" + d.UUID }

// Devices lists the GPUs NVML sees.
func (b *Backend) Devices() ([]gpu.DeviceInfo, error) {
	n, ret := b.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: device count: %w", ret)
	}
	out := make([]gpu.DeviceInfo, n)
	for i := range out {
		d, err := b.device(i)
		if err != nil {
			return nil, err
		}
		uuid, ret := d.GetUUID()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: GPU %d: uuid: %w", i, ret)
		}
		name, ret := d.GetName()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: GPU %d: name: %w", i, ret)
		}
		mem, ret := d.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvml: GPU %d: memory: %w", i, ret)
		}
		mig, _, ret := d.GetMigMode()
		if ret != nvml.SUCCESS && !errors.Is(ret, nvml.ERROR_NOT_SUPPORTED) {
			return nil, fmt.Errorf("nvml: GPU %d: MIG mode: %w", i, ret)
		}
		out[i] = gpu.DeviceInfo{Index: i, UUID: uuid, Model: name, MemoryBytes: int64(mem.Total),
			MIG: ret == nvml.SUCCESS && mig == nvml.DEVICE_MIG_ENABLE}
	}
	return out, nil
}

func (b *Backend) device(i int) (nvml.Device, error) {
	d, ret := b.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvml: GPU %d: %w", i, ret)
	}
	return d, nil
}

// Sample reads the device's utilisation and memory and attributes its
// processes to the pods (by cgroup, or by the pods' tracked processes).
func (b *Backend) Sample(index int, pods []gpu.Pod) (gpu.DeviceUsage, error) {
	d, err := b.device(index)
	if err != nil {
		return gpu.DeviceUsage{}, err
	}
	util, ret := d.GetUtilizationRates()
	if ret != nvml.SUCCESS {
		return gpu.DeviceUsage{}, fmt.Errorf("nvml: GPU %d: utilization: %w", index, ret)
	}
	mem, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return gpu.DeviceUsage{}, fmt.Errorf("nvml: GPU %d: memory: %w", index, ret)
	}
	procs, ret := d.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return gpu.DeviceUsage{}, fmt.Errorf("nvml: GPU %d: processes: %w", index, ret)
	}
	u := gpu.DeviceUsage{Utilization: float64(util.Gpu) / 100, MemoryUsedBytes: int64(mem.Used),
		Pods: make([]gpu.PodUsage, len(pods))}
	podOf := func(pid uint32) (int, bool) {
		for i, p := range pods {
			if p.Owns != nil && p.Owns(int(pid)) {
				return i, true
			}
		}
		return 0, false
	}
	present := make([]bool, len(pods))
	for _, p := range procs {
		if i, ok := podOf(p.Pid); ok {
			u.Pods[i].MemoryBytes += int64(p.UsedGpuMemory)
			present[i] = true
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	samples, ret := d.GetProcessUtilization(b.lastSeen[index])
	switch {
	case ret == nvml.SUCCESS:
		sm := make([]uint32, len(pods)) // percent
		for _, s := range samples {
			b.lastSeen[index] = max(b.lastSeen[index], s.TimeStamp)
			if i, ok := podOf(s.Pid); ok {
				sm[i] += s.SmUtil
			}
		}
		for i := range pods {
			u.Pods[i].Utilization = float64(min(sm[i], 100)) / 100
		}
	case errors.Is(ret, nvml.ERROR_NOT_FOUND): // no sample since lastSeen: nobody computed
	default:
		for i := range pods {
			if present[i] {
				u.Pods[i].Utilization = u.Utilization
			}
		}
	}
	return u, nil
}
