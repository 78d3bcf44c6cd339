package fairshare

import (
	"math"
	"time"
)

// Time-based fair share (SCHEDULING.md §2): a node pool may remember how much
// each queue used, decayed with a half-life, and lower the over-quota weight
// of the queues that used more than their weight's share. Deserved quotas are
// never touched; only the weights Divide's over-quota rounds use change.

// TimeBased is a node pool's time-based fair-share setting. The zero value is
// off.
type TimeBased struct {
	HalfLife time.Duration // how fast past usage is forgotten; > 0 to be on
	K        float64       // how strongly usage moves the weights; 0 leaves them as they are
}

// On reports whether usage is recorded (a half-life is set). With K = 0 it
// is recorded and shown but moves no weight.
func (t TimeBased) On() bool { return t.HalfLife > 0 }

// Accrue returns a queue's decayed usage after it held the amount held for a
// further dt: the old usage decays by 0.5^(dt/halfLife), and the new holding
// is integrated with each moment weighted the same way,
//
//	usage·d + held·τ·(1 − d),  d = 0.5^(dt/halfLife),  τ = halfLife / ln 2,
//
// so that one number per queue and resource stands for its whole history.
// Units are held's units times seconds. A dt or halfLife <= 0 changes
// nothing; a negative or non-finite input counts as 0.
func Accrue(usage, held float64, dt, halfLife time.Duration) float64 {
	usage, held = positive(usage), positive(held)
	if dt <= 0 || halfLife <= 0 {
		return usage
	}
	x := -dt.Seconds() / halfLife.Seconds() * math.Ln2
	tau := halfLife.Seconds() / math.Ln2
	// 1 - e^x via Expm1: exact for the short steps of a cycle, where 1 - d
	// would lose most of its digits.
	return usage*math.Exp(x) + held*tau*-math.Expm1(x)
}

// Adjustment is one queue's time-based weight among its siblings.
type Adjustment struct {
	UsageShare  float64 // u: its usage / the siblings' total usage (0 when nobody used anything)
	WeightShare float64 // s: its weight / the siblings' total weight
	Weight      float64 // w' = w · max(0, 1 + k·(s − u)/s): what the over-quota rounds use
}

// Adjust returns the adjusted weight of each sibling (index-aligned with
// weights and usage). Weights are normalised as Divide does (not a positive
// finite number: 0), and a queue of weight 0 keeps 0; a usage that is not a
// positive finite number counts as 0, and so does a k that is not. Sums run
// in index order: callers pass siblings in a fixed order.
func Adjust(k float64, weights, usage []float64) []Adjustment {
	out := make([]Adjustment, len(weights))
	k = positive(k)
	var sumW, sumU float64
	for i, w := range weights {
		sumW += positive(w)
		sumU += positive(usage[i])
	}
	for i, w := range weights {
		w = positive(w)
		a := Adjustment{}
		if sumU > 0 {
			a.UsageShare = positive(usage[i]) / sumU
		}
		if w > 0 {
			a.WeightShare = w / sumW
			a.Weight = w * max(0, 1+k*(a.WeightShare-a.UsageShare)/a.WeightShare)
		}
		out[i] = a
	}
	return out
}
