// Package gpu is how Runway sees a node's GPUs: a Backend lists the devices
// (DeviceInfo), and nothing above this package knows whether they come from
// NVML (nvidia/, issue 5) or from the simulator (simulated/). Fractions and
// time-slicing plans are built on top of this interface (issue 5).
package gpu
