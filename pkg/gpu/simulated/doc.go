// Package simulated is a gpu.Backend with made-up devices, for tests, the
// `runway dev` mode and machines without NVIDIA GPUs.
package simulated
