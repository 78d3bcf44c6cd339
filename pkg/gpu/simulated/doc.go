// Package simulated is a gpu.Backend with made-up devices, for tests, the
// `runway dev` mode and machines without NVIDIA GPUs.
//
// A simulated device's use is derived from the pods on it:
//   - memory: what each pod declares, in bytes, in the file named by
//     $RUNWAY_GPU_MEMORY_FILE (MemoryFile in its directory); no file is 0;
//   - utilisation: the CPU time of the pod's process group over the wall
//     time since the previous sample, one CPU busy being 100%; the
//     device's utilisation is the sum of its pods', at most 100%.
package simulated
