package fairshare_test

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/runwayhq/runway/pkg/fairshare"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) }

// The time-based rule of SCHEDULING.md §2: w' = w·max(0, 1 + k·(s − u)/s).
func TestAdjust(t *testing.T) {
	tests := map[string]struct {
		k              float64
		weights, usage []float64
		want           []fairshare.Adjustment
	}{
		"the scenario's worked example: s = 0.5 each, u = 1 and 0, k 0.5 give 0.5 and 1.5": {
			k: 0.5, weights: []float64{1, 1}, usage: []float64{6000, 0},
			want: []fairshare.Adjustment{{UsageShare: 1, WeightShare: 0.5, Weight: 0.5}, {UsageShare: 0, WeightShare: 0.5, Weight: 1.5}},
		},
		"k = 0 keeps every weight whatever the usage": {
			k: 0, weights: []float64{1, 3}, usage: []float64{100, 0},
			want: []fairshare.Adjustment{{UsageShare: 1, WeightShare: 0.25, Weight: 1}, {UsageShare: 0, WeightShare: 0.75, Weight: 3}},
		},
		"a queue of weight 0 keeps 0 and takes no weight share": {
			k: 1, weights: []float64{0, 2}, usage: []float64{0, 50},
			want: []fairshare.Adjustment{{UsageShare: 0, WeightShare: 0, Weight: 0}, {UsageShare: 1, WeightShare: 1, Weight: 2}},
		},
		"one queue alone keeps its weight when it used everything": {
			k: 1, weights: []float64{2}, usage: []float64{10},
			want: []fairshare.Adjustment{{UsageShare: 1, WeightShare: 1, Weight: 2}},
		},
		"nobody used anything: u = 0 and every weight grows by the same factor": {
			k: 0.5, weights: []float64{1, 3}, usage: []float64{0, 0},
			want: []fairshare.Adjustment{{WeightShare: 0.25, Weight: 1.5}, {WeightShare: 0.75, Weight: 4.5}},
		},
		"with k = 1 a queue that used twice its share gets nothing over quota": {
			k: 1, weights: []float64{1, 1, 2}, usage: []float64{50, 0, 50},
			want: []fairshare.Adjustment{
				{UsageShare: 0.5, WeightShare: 0.25, Weight: 0},
				{UsageShare: 0, WeightShare: 0.25, Weight: 2},
				{UsageShare: 0.5, WeightShare: 0.5, Weight: 2},
			},
		},
		"usage exactly at the weight share keeps the weight": {
			k: 3, weights: []float64{1, 3}, usage: []float64{25, 75},
			want: []fairshare.Adjustment{{UsageShare: 0.25, WeightShare: 0.25, Weight: 1}, {UsageShare: 0.75, WeightShare: 0.75, Weight: 3}},
		},
		"inputs outside the contract count as 0": {
			k: math.NaN(), weights: []float64{math.Inf(1), -1, 1}, usage: []float64{math.NaN(), -5, 1},
			want: []fairshare.Adjustment{{}, {}, {UsageShare: 1, WeightShare: 1, Weight: 1}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := fairshare.Adjust(tc.k, tc.weights, tc.usage)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d adjustments, want %d", len(got), len(tc.want))
			}
			for i, w := range tc.want {
				g := got[i]
				if !near(g.UsageShare, w.UsageShare) || !near(g.WeightShare, w.WeightShare) || !near(g.Weight, w.Weight) {
					t.Errorf("queue %d: got u=%v s=%v w'=%v, want u=%v s=%v w'=%v", i,
						g.UsageShare, g.WeightShare, g.Weight, w.UsageShare, w.WeightShare, w.Weight)
				}
			}
		})
	}
}

// Accrue is the integral of what a queue held, each moment weighted by
// 0.5^(age / half-life).
func TestAccrue(t *testing.T) {
	h := time.Hour
	tau := h.Seconds() / math.Ln2
	t.Run("usage with nothing held halves every half-life", func(t *testing.T) {
		if got := fairshare.Accrue(1000, 0, 2*h, h); !near(got, 250) {
			t.Errorf("got %v, want 250", got)
		}
	})
	t.Run("holding 8 for one half-life from nothing gives 8·τ/2", func(t *testing.T) {
		if got := fairshare.Accrue(0, 8, h, h); !near(got, 8*tau/2) {
			t.Errorf("got %v, want %v", got, 8*tau/2)
		}
	})
	t.Run("one-second steps add up to one long step", func(t *testing.T) {
		u := 0.0
		for range 7200 {
			u = fairshare.Accrue(u, 8000, time.Second, h)
		}
		if want := fairshare.Accrue(0, 8000, 2*h, h); !near(u, want) {
			t.Errorf("7200 steps of 1s: %v, one step of 2h: %v", u, want)
		}
	})
	t.Run("a constant holding converges to held·τ", func(t *testing.T) {
		if got := fairshare.Accrue(0, 3, 100*h, h); !near(got, 3*tau) {
			t.Errorf("got %v, want %v", got, 3*tau)
		}
	})
	t.Run("no time or no half-life changes nothing", func(t *testing.T) {
		if got := fairshare.Accrue(42, 8, 0, h); got != 42 {
			t.Errorf("dt 0: got %v", got)
		}
		if got := fairshare.Accrue(42, 8, time.Second, 0); got != 42 {
			t.Errorf("half-life 0: got %v", got)
		}
	})
}

// Properties of Adjust over random siblings: k = 0 changes no weight; usage
// in proportion to the weights changes none; a weight of 0 stays 0; and
// while no queue is clamped at 0 and only queues with weight used anything,
// the adjusted weights add up to the configured ones (what one queue loses
// the others gain).
func TestAdjustProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "n")
		weights := make([]float64, n)
		usage := make([]float64, n)
		proportional := make([]float64, n)
		var sumW float64
		for i := range n {
			weights[i] = rapid.SampledFrom([]float64{0, 0.5, 1, 2, 3}).Draw(t, "weight")
			usage[i] = rapid.Float64Range(0, 1e6).Draw(t, "usage")
			proportional[i] = weights[i] * 1234.5
			sumW += weights[i]
		}
		k := rapid.Float64Range(0, 10).Draw(t, "k")
		for i, a := range fairshare.Adjust(0, weights, usage) {
			if a.Weight != weights[i] {
				t.Fatalf("k = 0: queue %d weight %v → %v", i, weights[i], a.Weight)
			}
		}
		for i, a := range fairshare.Adjust(k, weights, proportional) {
			if !near(a.Weight, weights[i]) {
				t.Fatalf("usage in proportion to the weights: queue %d weight %v → %v", i, weights[i], a.Weight)
			}
		}
		for i := range usage {
			if weights[i] == 0 && rapid.Bool().Draw(t, "weightless queue used nothing") {
				usage[i] = 0
			}
		}
		adj := fairshare.Adjust(k, weights, usage)
		var sum float64
		clamped := false
		for i, a := range adj {
			if weights[i] == 0 && a.Weight != 0 {
				t.Fatalf("queue %d of weight 0 got %v", i, a.Weight)
			}
			if weights[i] > 0 && a.Weight == 0 {
				clamped = true
			}
			sum += a.Weight
		}
		var used, weightless float64
		for i, u := range usage {
			used += u
			if weights[i] == 0 {
				weightless += u
			}
		}
		// (With nobody having used anything every weight grows by 1 + k.)
		if want := sumW; used > 0 && weightless == 0 && !clamped && math.Abs(sum-want) > 1e-9*max(1, want) {
			t.Fatalf("adjusted weights add up to %v, configured %v (k %v)", sum, want, k)
		}
	})
}
