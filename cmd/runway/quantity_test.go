package main

import (
	"testing"

	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

func TestParseGPU(t *testing.T) {
	devices := func(n int32) *workloadv1.GpuRequest {
		return &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: n}}
	}
	fraction := func(m int32) *workloadv1.GpuRequest {
		return &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: m}}
	}
	for in, want := range map[string]*workloadv1.GpuRequest{
		"1": devices(1), "8": devices(8), "2.0": devices(2), "0.5": fraction(500), "0.25": fraction(250),
		"0.333": fraction(333), ".75": fraction(750), "0.001": fraction(1),
	} {
		got, err := parseGPU(in)
		if err != nil || !proto.Equal(got, want) {
			t.Errorf("parseGPU(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1", "1.5", "0.0001", "0.9999", "NaN", "Inf", "two", "3000000000"} {
		if got, err := parseGPU(in); err == nil {
			t.Errorf("parseGPU(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"1024": 1024, "1K": 1000, "1Ki": 1024, "512M": 512e6, "20G": 20e9, "1.5Gi": 3 << 29, "2T": 2e12, "1Ti": 1 << 40,
	} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1G", "0", "1X", "1e30T"} {
		if got, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", in, got)
		}
	}
}

func TestFormat(t *testing.T) {
	for milli, want := range map[int64]string{0: "0.00", 500: "0.50", 1000: "1.00", 2250: "2.25"} {
		if got := formatGPUs(milli); got != want {
			t.Errorf("formatGPUs(%d) = %q, want %q", milli, got, want)
		}
	}
	for b, want := range map[int64]string{512: "512", 1 << 20: "1Mi", 80 << 30: "80Gi", 3 << 29: "1.5Gi"} {
		if got := formatBytes(b); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", b, got, want)
		}
	}
}
