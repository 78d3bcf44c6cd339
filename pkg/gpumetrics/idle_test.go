package gpumetrics_test

import (
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/gpumetrics"
)

type sample struct {
	at   time.Duration // since the start
	util float64
}

// every returns samples each step from step to end, all at util.
func every(step, from, end time.Duration, util float64) []sample {
	var s []sample
	for at := from; at <= end; at += step {
		s = append(s, sample{at, util})
	}
	return s
}

func TestIdle(t *testing.T) {
	s := time.Second
	cat := func(parts ...[]sample) []sample {
		var out []sample
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		samples []sample
		want    time.Duration
		changes int
	}{
		{"no samples", nil, 0, 0},
		{"idle 29 s: no whole window", every(s, s, 29*s, 0), 0, 0},
		{"idle 30 s", every(s, s, 30*s, 0), 30 * s, 1},
		{"idle 95 s: three windows", every(s, s, 95*s, 0), 90 * s, 3},
		{"busy all along", every(s, s, 120*s, 0.5), 0, 0},
		{"one busy second resets", cat(every(s, s, 60*s, 0), []sample{{61 * s, 0.01}}, every(s, 62*s, 90*s, 0)), 0, 2 + 1},
		{"idle again after the reset", cat(every(s, s, 60*s, 0), []sample{{61 * s, 0.01}}, every(s, 62*s, 150*s, 0)), 60 * s, 2 + 1 + 2},
		{"busy in the last second of a window", cat(every(s, s, 29*s, 0), []sample{{30 * s, 1}}, every(s, 31*s, 60*s, 0)), 30 * s, 1},
		{"10 s samples", every(10*s, 10*s, 120*s, 0), 120 * s, 4},
		{"a busy sample spanning two windows", []sample{{10 * s, 0}, {50 * s, 0.2}, {70 * s, 0}, {95 * s, 0}}, 30 * s, 1},
		{"an idle gap of 100 s", []sample{{100 * s, 0}}, 90 * s, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			idle := gpumetrics.NewIdle(start, 0)
			changes := 0
			var got time.Duration
			for _, smp := range tc.samples {
				var changed bool
				got, changed = idle.Observe(start.Add(smp.at), smp.util)
				if changed {
					changes++
				}
			}
			if got != tc.want || idle.Value() != tc.want {
				t.Errorf("idle = %v (Value %v), want %v", got, idle.Value(), tc.want)
			}
			if changes != tc.changes {
				t.Errorf("changed %d times, want %d", changes, tc.changes)
			}
		})
	}
}
