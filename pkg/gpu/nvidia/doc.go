// Package nvidia is the gpu.Backend of NVIDIA GPUs, through NVML
// (github.com/NVIDIA/go-nvml, which needs cgo; libnvidia-ml is loaded at
// Load, not linked). A build without cgo has only a Load that fails, so the
// agent falls back to simulated devices.
//
// Per-pod use: memory is the sum of NVML's per-process used memory
// (GetComputeRunningProcesses) of the processes in the pod's process group;
// utilisation is the sum of their SM utilisation samples
// (GetProcessUtilization); where the driver gives no per-process samples, a
// pod with a process on the device is credited the device's utilisation.
package nvidia
