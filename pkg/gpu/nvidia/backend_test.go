//go:build cgo

package nvidia_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/gpu"
	"github.com/runwayhq/runway/pkg/gpu/nvidia"
	"github.com/runwayhq/runway/pkg/procstat"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDevices_dgxh100(t *testing.T) {
	b, err := nvidia.New(dgxh100.New())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	devs, err := b.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 8 {
		t.Fatalf("got %d devices, want 8", len(devs))
	}
	uuids := map[string]bool{}
	for i, d := range devs {
		if d.Index != i || d.Model != "NVIDIA H100 80GB HBM3" || d.MemoryBytes != 80<<30 || d.MIG || d.UUID == "" {
			t.Errorf("device %d = %+v", i, d)
		}
		uuids[d.UUID] = true
	}
	if len(uuids) != 8 {
		t.Errorf("UUIDs not distinct: %v", uuids)
	}
}

func TestDevices_migEnabled(t *testing.T) {
	lib := dgxh100.New()
	if ret, _ := lib.Devices[3].SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	b, err := nvidia.New(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	devs, err := b.Devices()
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range devs {
		if d.MIG != (i == 3) {
			t.Errorf("device %d MIG = %v", i, d.MIG)
		}
	}
}

// group starts two sleeping processes in one new process group and
// returns their pids (the first is the group's id).
func group(t *testing.T) (leader, member int) {
	t.Helper()
	start := func(pgid int) int {
		c := exec.Command("sleep", "60")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		return c.Process.Pid
	}
	leader = start(0)
	return leader, start(leader)
}

// Per-process memory and utilisation are attributed to the pod that owns
// the process; others' processes count only for the
// device.
func TestSample_perProcess(t *testing.T) {
	lib := dgxh100.New()
	d := lib.Devices[2].(*server.Device)
	leader, member := group(t)
	other := os.Getpid() // not in the pod's group
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 70}, nvml.SUCCESS
	}
	d.MemoryInfo.Used = 20 << 30
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: uint32(leader), UsedGpuMemory: 10 << 30},
			{Pid: uint32(member), UsedGpuMemory: 2 << 30},
			{Pid: uint32(other), UsedGpuMemory: 5 << 30},
		}, nvml.SUCCESS
	}
	var since []uint64
	utilRet := nvml.SUCCESS
	d.GetProcessUtilizationFunc = func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		since = append(since, last)
		if utilRet != nvml.SUCCESS {
			return nil, utilRet
		}
		return []nvml.ProcessUtilizationSample{
			{Pid: uint32(leader), TimeStamp: 1000, SmUtil: 40},
			{Pid: uint32(member), TimeStamp: 1500, SmUtil: 20},
			{Pid: uint32(other), TimeStamp: 1200, SmUtil: 30},
		}, nvml.SUCCESS
	}
	b, err := nvidia.New(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// The pod owns the processes of its group (the runner's answer).
	owns := func(pid int) bool { g, ok := procstat.Group(pid); return ok && g == leader }
	pods := []gpu.Pod{{Key: "a", Owns: owns}, {Key: "b", Owns: func(int) bool { return false }}}
	u, err := b.Sample(2, pods)
	if err != nil {
		t.Fatal(err)
	}
	if u.Utilization != 0.7 || u.MemoryUsedBytes != 20<<30 {
		t.Errorf("device usage = %+v, want 70%% and 20 GiB", u)
	}
	if u.Pods[0].MemoryBytes != 12<<30 || u.Pods[0].Utilization != 0.6 {
		t.Errorf("pod usage = %+v, want 12 GiB and 60%%", u.Pods[0])
	}
	if u.Pods[1] != (gpu.PodUsage{}) {
		t.Errorf("absent pod usage = %+v, want none", u.Pods[1])
	}

	utilRet = nvml.ERROR_NOT_FOUND // no new samples: nobody computed
	if u, err = b.Sample(2, pods); err != nil || u.Pods[0].Utilization != 0 || u.Pods[0].MemoryBytes != 12<<30 {
		t.Errorf("no samples: usage = %+v, %v; want 0%% and 12 GiB", u.Pods[0], err)
	}
	if len(since) != 2 || since[0] != 0 || since[1] != 1500 {
		t.Errorf("process samples asked since %v, want [0 1500]", since)
	}
	utilRet = nvml.ERROR_NOT_SUPPORTED // no per-process samples: the device's
	if u, err = b.Sample(2, pods); err != nil || u.Pods[0].Utilization != 0.7 || u.Pods[1].Utilization != 0 {
		t.Errorf("unsupported: usage = %+v, %v; want the device's 70%% for the pod on it", u.Pods, err)
	}
	if _, err := b.Sample(9, pods); err == nil {
		t.Error("Sample of GPU 9 succeeded")
	}
}

// WatchHealth: an XID event of the event set marks its device unhealthy
// (found by UUID); an application XID does not.
func TestWatchHealth_xid(t *testing.T) {
	lib := dgxh100.New()
	events := make(chan nvml.EventData, 2)
	var registered int
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				select {
				case e := <-events:
					return e, nvml.SUCCESS
				case <-time.After(time.Duration(ms) * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
		}, nvml.SUCCESS
	}
	for _, d := range lib.Devices {
		d.(*server.Device).RegisterEventsFunc = func(types uint64, _ nvml.EventSet) nvml.Return {
			if types&nvml.EventTypeXidCriticalError != 0 {
				registered++
			}
			return nvml.SUCCESS
		}
	}
	b, err := nvidia.New(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.WatchHealth(ctx) }()
	events <- nvml.EventData{Device: lib.Devices[5], EventType: nvml.EventTypeXidCriticalError, EventData: 13}
	events <- nvml.EventData{Device: lib.Devices[2], EventType: nvml.EventTypeXidCriticalError, EventData: 48}
	deadline := time.Now().Add(5 * time.Second)
	for len(b.Unhealthy()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := b.Unhealthy(); len(got) != 1 || got[2] != "XID 48: double-bit ECC error" {
		t.Errorf("Unhealthy() = %v, want GPU 2 with XID 48 only", got)
	}
	if registered != 8 {
		t.Errorf("registered XID events on %d devices, want 8", registered)
	}
}

// watchWith runs WatchHealth on a mock H100 system whose event set's Wait
// is wait; it returns the system, the backend, WatchHealth's result and a
// cancel.
func watchWith(t *testing.T, wait func(ms uint32) (nvml.EventData, nvml.Return)) (*server.Server, *nvidia.Backend, <-chan error, context.CancelFunc) {
	t.Helper()
	lib := dgxh100.New()
	lib.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{FreeFunc: func() nvml.Return { return nvml.SUCCESS }, WaitFunc: wait}, nvml.SUCCESS
	}
	for _, d := range lib.Devices {
		d.(*server.Device).RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	}
	b, err := nvidia.New(lib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done := make(chan error, 1)
	ended := make(chan struct{})
	go func() { defer close(ended); done <- b.WatchHealth(ctx) }()
	t.Cleanup(func() { cancel(); <-ended })
	return lib, b, done, cancel
}

// WatchHealth: a wait that fails (not a timeout) is retried after a
// growing pause, not at once; once waits succeed again, XIDs are seen.
func TestWatchHealth_backsOffOnErrors(t *testing.T) {
	var waits atomic.Int64
	var recovered atomic.Bool
	var dev nvml.Device
	lib, b, done, cancel := watchWith(t, func(uint32) (nvml.EventData, nvml.Return) {
		waits.Add(1)
		if !recovered.Load() {
			return nvml.EventData{}, nvml.ERROR_UNKNOWN
		}
		time.Sleep(10 * time.Millisecond)
		return nvml.EventData{Device: dev, EventType: nvml.EventTypeXidCriticalError, EventData: 48}, nvml.SUCCESS
	})
	dev = lib.Devices[0]
	time.Sleep(500 * time.Millisecond)
	// A spinning loop waits millions of times in this half second; with the
	// pauses (100, 200, 400 ms) it is a handful.
	if n := waits.Load(); n > 10 {
		t.Fatalf("%d waits in 500 ms of failing waits, want a handful (a pause between them)", n)
	}
	recovered.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for len(b.Unhealthy()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("WatchHealth: %v, want nil after transient errors", err)
	}
	if got := b.Unhealthy(); got[0] == "" {
		t.Errorf("Unhealthy() = %v after the waits recovered, want GPU 0 marked by XID 48", got)
	}
}

// WatchHealth: a wait that says NVML itself is gone (shut down) ends the
// watch with that error at once instead of retrying forever.
func TestWatchHealth_stopsWhenNVMLIsGone(t *testing.T) {
	var waits atomic.Int64
	_, _, done, _ := watchWith(t, func(uint32) (nvml.EventData, nvml.Return) {
		waits.Add(1)
		return nvml.EventData{}, nvml.ERROR_UNINITIALIZED
	})
	select {
	case err := <-done:
		if !errors.Is(err, nvml.ERROR_UNINITIALIZED) {
			t.Errorf("WatchHealth: %v, want the UNINITIALIZED error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("WatchHealth still running after %d waits that say NVML is uninitialised", waits.Load())
	}
	if n := waits.Load(); n != 1 {
		t.Errorf("%d waits, want 1", n)
	}
}
