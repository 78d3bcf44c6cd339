package cluster

import (
	"fmt"
	"strconv"
)

// Unlimited marks a quota field with no bound (deserved -1, limit -1).
const Unlimited int64 = -1

// Resource names one dimension of a Resources vector.
type Resource int

// The resources Runway schedules, in the order reasons and outputs list them.
const (
	GPU Resource = iota
	CPU
	Memory
	NumResources
)

var resourceNames = [...]string{"gpu", "cpu", "memory"}

func (r Resource) String() string { return resourceNames[r] }

// Unit is one whole unit of r: fair share is divided in whole units.
func (r Resource) Unit() int64 {
	switch r {
	case Memory:
		return 1 << 20 // 1 MiB
	default:
		return 1000 // one GPU, one core
	}
}

// Resources is an amount of every resource: milli-GPUs, milli-cores, bytes.
type Resources struct {
	GPU, CPU, Memory int64
}

// Get returns the amount of r.
func (a Resources) Get(r Resource) int64 {
	switch r {
	case GPU:
		return a.GPU
	case CPU:
		return a.CPU
	default:
		return a.Memory
	}
}

// Set returns a with r set to v.
func (a Resources) Set(r Resource, v int64) Resources {
	switch r {
	case GPU:
		a.GPU = v
	case CPU:
		a.CPU = v
	default:
		a.Memory = v
	}
	return a
}

// Add returns a + b.
func (a Resources) Add(b Resources) Resources {
	return Resources{a.GPU + b.GPU, a.CPU + b.CPU, a.Memory + b.Memory}
}

// Sub returns a - b.
func (a Resources) Sub(b Resources) Resources {
	return Resources{a.GPU - b.GPU, a.CPU - b.CPU, a.Memory - b.Memory}
}

// Scale returns a * n.
func (a Resources) Scale(n int) Resources {
	k := int64(n)
	return Resources{a.GPU * k, a.CPU * k, a.Memory * k}
}

// IsZero reports whether every amount is zero.
func (a Resources) IsZero() bool { return a == Resources{} }

// FormatAmount renders an amount of r for people: GPUs and cores as decimals
// ("1.5"), memory in GiB ("0.5 GiB").
func FormatAmount(r Resource, v int64) string {
	switch r {
	case Memory:
		return strconv.FormatFloat(float64(v)/(1<<30), 'f', -1, 64) + " GiB"
	default:
		return strconv.FormatFloat(float64(v)/1000, 'f', -1, 64)
	}
}

// Quantity renders an amount of r with its unit name, e.g. "3 GPUs", "0.5 GPU", "2 cores".
func Quantity(r Resource, v int64) string {
	n := FormatAmount(r, v)
	switch r {
	case GPU:
		if v == 1000 || (v < 1000 && v > 0) {
			return n + " GPU"
		}
		return n + " GPUs"
	case CPU:
		if v == 1000 {
			return n + " core"
		}
		return n + " cores"
	default:
		return n
	}
}

// MilliFromFloat converts a decimal amount (GPUs, cores) to milli-units,
// rounding to the nearest milli so that 0.1 + 0.2 fits 0.3.
func MilliFromFloat(f float64) int64 {
	if f < 0 {
		return -int64(-f*1000 + 0.5)
	}
	return int64(f*1000 + 0.5)
}

// BytesFromGiB converts GiB to bytes, keeping -1 (unlimited) as is.
func BytesFromGiB(f float64) int64 {
	if f < 0 {
		return Unlimited
	}
	return int64(f*(1<<30) + 0.5)
}

func (a Resources) String() string {
	return fmt.Sprintf("gpu=%s cpu=%s memory=%s", FormatAmount(GPU, a.GPU), FormatAmount(CPU, a.CPU), FormatAmount(Memory, a.Memory))
}
