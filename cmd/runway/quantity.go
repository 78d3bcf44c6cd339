package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// parseGPU reads -g: a whole number of devices ("2") or a fraction of one
// device ("0.5", 0 < f < 1, in thousandths).
func parseGPU(s string) (*workloadv1.GpuRequest, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("bad GPU value %q: want a number of GPUs (2) or a fraction of one (0.5)", s)
	}
	switch {
	case f <= 0:
		return nil, fmt.Errorf("bad GPU value %q: must be more than 0", s)
	case f < 1:
		milli := int32(math.Round(f * 1000))
		if milli < 1 || milli > 999 {
			return nil, fmt.Errorf("bad GPU value %q: a fraction must be between 0.001 and 0.999", s)
		}
		return &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_FractionMilli{FractionMilli: milli}}, nil
	case f != math.Trunc(f):
		return nil, fmt.Errorf("bad GPU value %q: more than one GPU must be a whole number", s)
	case f > math.MaxInt32:
		return nil, fmt.Errorf("bad GPU value %q: too many", s)
	}
	return &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: int32(f)}}, nil
}

// parseBytes reads a memory size: "512M", "20G", "1.5Gi", "1024" (bytes).
// K/M/G/T are powers of 1000 and Ki/Mi/Gi/Ti of 1024, as in Kubernetes.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
		{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	num, mult := s, 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || f*mult > math.MaxInt64 {
		return 0, fmt.Errorf("bad memory size %q: want a positive size such as 512M, 20G or 1.5Gi", s)
	}
	return int64(math.Round(f * mult)), nil
}

// parseCPU reads cores ("0.5", "2") as milli-cores.
func parseCPU(s string) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) || f > 1e9 {
		return 0, fmt.Errorf("bad CPU value %q: want cores, such as 0.5 or 4", s)
	}
	return int64(math.Round(f * 1000)), nil
}

// formatGPUs prints milli-GPUs as the runai CLI does: "1.00", "0.50".
func formatGPUs(milli int64) string { return strconv.FormatFloat(float64(milli)/1000, 'f', 2, 64) }

// formatBytes prints a size with a binary unit: "80Gi", "1.5Gi", "512Mi".
func formatBytes(b int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b >= u.size {
			return strconv.FormatFloat(float64(b)/float64(u.size), 'g', 4, 64) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10)
}
