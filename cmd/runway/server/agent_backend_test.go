package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/runwayhq/runway/pkg/gpu/nvidia"
)

// Without an NVIDIA driver, auto says in the log that it falls back to
// simulated GPUs, nvml fails with NVML's reason, and simulated never
// tries NVML.
func TestOpenBackend_withoutDriver(t *testing.T) {
	if b, closeFn, err := nvidia.Load(); err == nil {
		closeFn()
		t.Skipf("an NVIDIA driver is present (%T): this test is about machines without one", b)
	}
	var log bytes.Buffer
	cfg := AgentConfig{Node: "n1", GPUs: 3, Logger: slog.New(slog.NewTextHandler(&log, nil))}

	cfg.GPUBackend = BackendAuto
	b, closeFn, err := openBackend(cfg)
	if err != nil {
		t.Fatal(err)
	}
	closeFn()
	devs, _ := b.Devices()
	if len(devs) != 3 || !strings.Contains(log.String(), "NVML unavailable; using simulated GPUs") {
		t.Errorf("auto: %d devices, log %q; want 3 simulated GPUs and the fallback logged", len(devs), log.String())
	}

	cfg.GPUBackend = BackendNVML
	if _, _, err := openBackend(cfg); err == nil || !strings.Contains(err.Error(), "nvml") {
		t.Errorf("nvml: err = %v, want NVML's error", err)
	}

	log.Reset()
	cfg.GPUBackend = BackendSimulated
	if b, _, err := openBackend(cfg); err != nil || log.Len() != 0 {
		t.Errorf("simulated: %v, %v, log %q", b, err, log.String())
	}
	cfg.GPUBackend = "rocm"
	if _, _, err := openBackend(cfg); err == nil {
		t.Error("an unknown backend was accepted")
	}
}
