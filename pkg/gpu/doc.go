// Package gpu is how Runway sees a node's GPUs: a Backend lists the devices
// (DeviceInfo) and samples their use per pod (Sample), and nothing above this
// package knows whether they come from NVML (nvidia/) or from the simulator
// (simulated/).
package gpu
