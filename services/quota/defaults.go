package quota

import (
	"crypto/rand"
	"fmt"
	"maps"
	"slices"

	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/timeslice"
)

// Defaults (shared/SCHEDULING.md §1, proto/runway/quota/v1/quota.proto). The
// server stores and returns effective values, so a read always shows every
// field set and nobody downstream re-derives a default.
const (
	unlimited           = -1
	defaultWeight       = 1
	defaultLease        = timeslice.DefaultLease
	defaultPrecisionPct = timeslice.DefaultPrecision
	defaultFairShareK   = 1.0
)

// fillQuotas sets every unset field of qs to its default: GPUs deserved 0
// (-1 for the built-in default department), CPU and memory deserved -1,
// weight 1, no limit, over-quota on.
func fillQuotas(qs []*quotav1.NodePoolQuota, unlimitedGPUs bool) {
	gpuDeserved := int64(0)
	if unlimitedGPUs {
		gpuDeserved = unlimited
	}
	for _, q := range qs {
		if q.Gpu == nil {
			q.Gpu = &quotav1.GpuQuota{}
		}
		g := q.Gpu
		fillAmounts(&g.DeservedMilliGpus, &g.LimitMilliGpus, &g.OverQuotaWeight, &g.OverQuotaEnabled, gpuDeserved)
		if q.Cpu == nil {
			q.Cpu = &quotav1.CpuQuota{}
		}
		c := q.Cpu
		fillAmounts(&c.DeservedMilliCpu, &c.LimitMilliCpu, &c.OverQuotaWeight, &c.OverQuotaEnabled, unlimited)
		if q.Memory == nil {
			q.Memory = &quotav1.MemoryQuota{}
		}
		m := q.Memory
		fillAmounts(&m.DeservedMemoryBytes, &m.LimitMemoryBytes, &m.OverQuotaWeight, &m.OverQuotaEnabled, unlimited)
	}
}

// fillAmounts fills one resource's quota. It takes the fields by address
// because GPU, CPU and memory quotas are distinct messages with the same
// four fields under different names.
func fillAmounts(deserved, limit **int64, weight **int32, enabled **bool, deservedDefault int64) {
	*deserved = orDefault(*deserved, deservedDefault)
	*limit = orDefault(*limit, unlimited)
	*weight = orDefault(*weight, defaultWeight)
	*enabled = orDefault(*enabled, true)
}

func orDefault[T int64 | int32 | bool](p *T, def T) *T {
	if p != nil {
		return p
	}
	return &def
}

// fillNodePool sets a pool's unset fields: binpack, time slicing off with
// 250 ms leases and 5% precision (a 5 s plan), and k = 1 where time-based
// fair share is on (it stays off, unset, by default).
func fillNodePool(np *quotav1.NodePool) {
	if np.PlacementStrategy == quotav1.PlacementStrategy_PLACEMENT_STRATEGY_UNSPECIFIED {
		np.PlacementStrategy = quotav1.PlacementStrategy_PLACEMENT_STRATEGY_BINPACK
	}
	if np.TimeSlicing == nil {
		np.TimeSlicing = &quotav1.TimeSlicing{}
	}
	ts := np.TimeSlicing
	if ts.Mode == quotav1.TimeSlicingMode_TIME_SLICING_MODE_UNSPECIFIED {
		ts.Mode = quotav1.TimeSlicingMode_TIME_SLICING_MODE_OFF
	}
	if ts.LeaseDuration == nil {
		ts.LeaseDuration = durationpb.New(defaultLease)
	}
	if ts.PrecisionPercent == 0 {
		ts.PrecisionPercent = defaultPrecisionPct
	}
	if tb := np.TimeBasedFairShare; tb != nil && tb.K == nil {
		k := defaultFairShareK
		tb.K = &k
	}
}

// fillDepartment sets a department's unset quota fields.
func fillDepartment(d *quotav1.Department) {
	fillQuotas(d.NodePoolQuotas, d.GetName() == defaultDept)
}

// fillProject sets a project's unset fields: the default department and the
// quota defaults. Its default node pools are the settings' (prepareProject).
func fillProject(p *quotav1.Project) {
	if p.Department == "" {
		p.Department = defaultDept
	}
	fillQuotas(p.NodePoolQuotas, false)
}

// newUID returns a random (version 4) UUID.
func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
