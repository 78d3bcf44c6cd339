package timeslice

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Mode is how a shared device's time is divided.
type Mode int

// The modes; Off means no plan at all (the driver's own sharing).
const (
	Off Mode = iota
	Strict
	Fair
)

func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Strict:
		return "strict"
	case Fair:
		return "fair"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Defaults of a node pool's time-slicing settings.
const (
	DefaultLease     = 250 * time.Millisecond
	DefaultPrecision = 5 // percent
)

// ValidPrecision reports whether a precision in percent makes a whole
// number of leases: a divisor of 100 from 1 to 50.
func ValidPrecision(pct int) bool { return pct >= 1 && pct <= 50 && 100%pct == 0 }

// Sharer is one workload pod on the device.
type Sharer struct {
	// ID identifies the sharer to the caller (the agent uses the pod's key).
	ID string
	// FractionMilli is its share of the device, 1..1000.
	FractionMilli int64
}

// Slot is a sharer's own leases: [First, First+Count) of the plan.
type Slot struct {
	ID           string
	First, Count int
}

// Plan is one device's time-slicing plan.
type Plan struct {
	Mode  Mode
	Lease time.Duration
	// Leases is the number of leases in one plan (100 / precision).
	Leases int
	// Slots are the sharers' own leases, in the order of the sharers given
	// to New, consecutive from lease 0.
	Slots []Slot
}

// Duration is how long one plan lasts.
func (p Plan) Duration() time.Duration { return p.Lease * time.Duration(p.Leases) }

// New makes the plan of sharers: each gets its fraction of the Leases,
// rounded to the nearest lease and at least one; when rounding up would
// overbook the plan the leases are taken back from the sharers rounded up
// the most. Fractions adding up to more than one device, more sharers than
// leases, Off, and settings out of range are errors.
func New(mode Mode, lease time.Duration, precisionPct int, sharers []Sharer) (Plan, error) {
	switch {
	case mode != Strict && mode != Fair:
		return Plan{}, fmt.Errorf("timeslice: mode %v has no plan", mode)
	case lease <= 0:
		return Plan{}, fmt.Errorf("timeslice: lease %v must be positive", lease)
	case !ValidPrecision(precisionPct):
		return Plan{}, fmt.Errorf("timeslice: precision %d%% must divide 100 and be 1-50", precisionPct)
	case len(sharers) == 0:
		return Plan{}, errors.New("timeslice: no sharers")
	}
	n := 100 / precisionPct
	if len(sharers) > n {
		return Plan{}, fmt.Errorf("timeslice: %d sharers do not fit %d leases of %d%%", len(sharers), n, precisionPct)
	}
	var total int64
	for _, s := range sharers {
		if s.FractionMilli < 1 || s.FractionMilli > 1000 {
			return Plan{}, fmt.Errorf("timeslice: sharer %q has fraction %d/1000, want 1-1000", s.ID, s.FractionMilli)
		}
		total += s.FractionMilli
	}
	if total > 1000 {
		return Plan{}, fmt.Errorf("timeslice: fractions add up to %d/1000, more than one device", total)
	}
	counts := make([]int, len(sharers))
	sum := 0
	for i, s := range sharers {
		// Nearest lease, halves up: (2·f·n + 1000) / 2000.
		counts[i] = max(int((2*s.FractionMilli*int64(n)+1000)/2000), 1)
		sum += counts[i]
	}
	for sum > n {
		// Take one back from the sharer rounded up the most (overshoot
		// count·1000 − f·n), the last such on ties; never below one lease.
		best, bestOver := -1, int64(-1<<62)
		for i, s := range sharers {
			over := int64(counts[i])*1000 - s.FractionMilli*int64(n)
			if counts[i] > 1 && over >= bestOver {
				best, bestOver = i, over
			}
		}
		counts[best]--
		sum--
	}
	p := Plan{Mode: mode, Lease: lease, Leases: n, Slots: make([]Slot, len(sharers))}
	first := 0
	for i, s := range sharers {
		p.Slots[i] = Slot{ID: s.ID, First: first, Count: counts[i]}
		first += counts[i]
	}
	return p, nil
}

// Owner returns the slot index owning lease i, or -1 for an unowned lease.
func (p Plan) Owner(i int) int {
	for j, s := range p.Slots {
		if i >= s.First && i < s.First+s.Count {
			return j
		}
	}
	return -1
}

// Schedule returns, for each lease of one plan, the slot index that runs
// in it, or -1 for nobody. busy[j] says whether slot j's sharer is busy;
// round rotates who gets the odd lease when the freed leases do not divide
// equally, so that over many plans the busy sharers get them alike.
func (p Plan) Schedule(busy []bool, round int) []int {
	out := make([]int, p.Leases)
	var freed []int
	for i := range out {
		out[i] = p.Owner(i)
		if p.Mode == Fair && (out[i] < 0 || !busy[out[i]]) {
			freed = append(freed, i)
		}
	}
	var takers []int
	for j := range p.Slots {
		if busy[j] {
			takers = append(takers, j)
		}
	}
	if len(takers) == 0 {
		return out
	}
	off := round % len(takers)
	for k, i := range freed {
		out[i] = takers[(k+off)%len(takers)]
	}
	return out
}

// Shares counts the leases each slot runs in a schedule.
func Shares(schedule []int, slots int) []int {
	c := make([]int, slots)
	for _, j := range schedule {
		if j >= 0 {
			c[j]++
		}
	}
	return c
}

// Equal reports whether two plans divide the device the same way.
func Equal(a, b Plan) bool {
	return a.Mode == b.Mode && a.Lease == b.Lease && a.Leases == b.Leases && slices.Equal(a.Slots, b.Slots)
}
