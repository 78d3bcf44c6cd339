package timeslice_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runwayhq/runway/pkg/timeslice"
)

func sharers(milli ...int64) []timeslice.Sharer {
	s := make([]timeslice.Sharer, len(milli))
	for i, m := range milli {
		s[i] = timeslice.Sharer{ID: fmt.Sprint("w", i), FractionMilli: m}
	}
	return s
}

func counts(p timeslice.Plan) []int {
	c := make([]int, len(p.Slots))
	for i, s := range p.Slots {
		c[i] = s.Count
	}
	return c
}

func TestNew_leaseCounts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		precision int
		milli     []int64
		want      []int
	}{
		{"two halves", 5, []int64{500, 500}, []int{10, 10}},
		{"quarter and three quarters", 5, []int64{250, 750}, []int{5, 15}},
		{"a third rounds to 35%", 5, []int64{330}, []int{7}},
		{"three thirds overbook, last one gives back", 5, []int64{330, 330, 330}, []int{7, 7, 6}},
		{"odd fractions", 5, []int64{170, 260, 90}, []int{3, 5, 2}},
		{"tiny fraction gets one lease", 5, []int64{10, 990}, []int{1, 19}},
		{"rounded-up most gives back", 10, []int64{160, 250, 560}, []int{2, 2, 6}},
		{"ten sharers of a tenth", 5, []int64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100}, []int{2, 2, 2, 2, 2, 2, 2, 2, 2, 2}},
		{"ten odd sharers", 5, []int64{30, 40, 60, 70, 80, 90, 110, 120, 130, 270}, []int{1, 1, 1, 1, 2, 2, 2, 2, 3, 5}},
		{"precision 1", 1, []int64{333, 333, 334}, []int{33, 33, 33}},
		{"precision 50", 50, []int64{500, 500}, []int{1, 1}},
		{"partial device", 5, []int64{250, 250}, []int{5, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := timeslice.New(timeslice.Strict, 250*time.Millisecond, tc.precision, sharers(tc.milli...))
			if err != nil {
				t.Fatal(err)
			}
			if got := counts(p); !slices.Equal(got, tc.want) {
				t.Errorf("lease counts = %v, want %v", got, tc.want)
			}
			if p.Leases != 100/tc.precision {
				t.Errorf("leases = %d, want %d", p.Leases, 100/tc.precision)
			}
			first := 0
			for _, s := range p.Slots {
				if s.First != first {
					t.Errorf("slot %s starts at %d, want %d", s.ID, s.First, first)
				}
				first += s.Count
			}
			if first > p.Leases {
				t.Errorf("slots use %d of %d leases", first, p.Leases)
			}
		})
	}
}

func TestNew_defaultPlanLastsFiveSeconds(t *testing.T) {
	p, err := timeslice.New(timeslice.Fair, timeslice.DefaultLease, timeslice.DefaultPrecision, sharers(500, 500))
	if err != nil {
		t.Fatal(err)
	}
	if p.Duration() != 5*time.Second || p.Leases != 20 {
		t.Errorf("plan = %d leases, %v; want 20 leases, 5s", p.Leases, p.Duration())
	}
}

func TestNew_errors(t *testing.T) {
	for name, tc := range map[string]struct {
		mode      timeslice.Mode
		lease     time.Duration
		precision int
		s         []timeslice.Sharer
	}{
		"off":                 {timeslice.Off, time.Second, 5, sharers(500)},
		"zero lease":          {timeslice.Strict, 0, 5, sharers(500)},
		"precision 3":         {timeslice.Strict, time.Second, 3, sharers(500)},
		"precision 0":         {timeslice.Strict, time.Second, 0, sharers(500)},
		"no sharers":          {timeslice.Strict, time.Second, 5, nil},
		"overbooked":          {timeslice.Strict, time.Second, 5, sharers(600, 500)},
		"zero fraction":       {timeslice.Strict, time.Second, 5, sharers(0, 500)},
		"more sharers than 2": {timeslice.Strict, time.Second, 50, sharers(300, 300, 300)},
	} {
		if _, err := timeslice.New(tc.mode, tc.lease, tc.precision, tc.s); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  timeslice.Mode
		milli []int64
		busy  []bool
		round int
		want  []int // leases run per slot
	}{
		{"strict, all busy", timeslice.Strict, []int64{250, 750}, []bool{true, true}, 0, []int{5, 15}},
		{"strict, idle keeps its leases", timeslice.Strict, []int64{250, 750}, []bool{true, false}, 0, []int{5, 15}},
		{"strict, unowned leases stay idle", timeslice.Strict, []int64{250, 250}, []bool{true, true}, 0, []int{5, 5}},
		{"fair, all busy", timeslice.Fair, []int64{250, 750}, []bool{true, true}, 0, []int{5, 15}},
		{"fair, idle 0.75 gives all to 0.25", timeslice.Fair, []int64{250, 750}, []bool{true, false}, 0, []int{20, 0}},
		{"fair, unowned leases shared equally", timeslice.Fair, []int64{250, 250}, []bool{true, true}, 0, []int{10, 10}},
		{"fair, idle leases divided equally not by fraction", timeslice.Fair, []int64{100, 300, 600}, []bool{true, true, false}, 0, []int{8, 12, 0}},
		{"fair, odd freed lease goes round robin", timeslice.Fair, []int64{100, 100, 100, 350}, []bool{true, true, true, false}, 0, []int{7, 7, 6, 0}},
		{"fair, odd freed lease rotates with round", timeslice.Fair, []int64{100, 100, 100, 350}, []bool{true, true, true, false}, 1, []int{6, 7, 7, 0}},
		{"fair, nobody busy keeps the plan", timeslice.Fair, []int64{250, 500}, []bool{false, false}, 0, []int{5, 10}},
		{"fair, ten sharers, nine idle", timeslice.Fair, []int64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100},
			[]bool{false, false, false, false, true, false, false, false, false, false}, 0, []int{0, 0, 0, 0, 20, 0, 0, 0, 0, 0}},
		{"fair, ten sharers, two idle", timeslice.Fair, []int64{100, 100, 100, 100, 100, 100, 100, 100, 100, 100},
			[]bool{true, false, true, true, true, true, true, true, false, true}, 0, []int{3, 0, 3, 3, 3, 2, 2, 2, 0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := timeslice.New(tc.mode, 250*time.Millisecond, 5, sharers(tc.milli...))
			if err != nil {
				t.Fatal(err)
			}
			s := p.Schedule(tc.busy, tc.round)
			if len(s) != p.Leases {
				t.Fatalf("schedule has %d leases, want %d", len(s), p.Leases)
			}
			if got := timeslice.Shares(s, len(p.Slots)); !slices.Equal(got, tc.want) {
				t.Errorf("leases run = %v, want %v (schedule %v)", got, tc.want, s)
			}
			for i, j := range s {
				if own := p.Owner(i); own >= 0 && tc.busy[own] && j != own {
					t.Errorf("lease %d of busy slot %d went to %d", i, own, j)
				}
			}
		})
	}
}
