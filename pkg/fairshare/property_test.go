package fairshare_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/runwayhq/runway/pkg/fairshare"
)

// division is one random call to Divide. Names are unique so that results
// can be compared per name after shuffling.
type division struct {
	amount, unit int64
	qs           []fairshare.Queue
}

func genDivision(t *rapid.T) division {
	unit := rapid.SampledFrom([]int64{1000, 1, 7, 250}).Draw(t, "unit")
	// Amounts are drawn on a grain of a whole, half or quarter unit, or any
	// milli-unit, so that requests often land close to offers, fractions
	// tie and the leftover pass matters.
	grain := max(unit/rapid.SampledFrom([]int64{1, 2, 4, unit}).Draw(t, "grain divisor"), 1)
	amt := func(label string, hi int64) int64 {
		return rapid.Int64Range(0, hi).Draw(t, label) * grain
	}
	d := division{
		amount: rapid.Int64Range(-2, 60).Draw(t, "amount") * grain,
		unit:   unit,
	}
	weights := rapid.SampledFrom([]float64{0, 0.5, 1, 1, 2, 3})
	n := rapid.IntRange(0, 8).Draw(t, "n")
	for i := range n {
		qt := fairshare.Queue{
			Name:     fmt.Sprintf("q%d", i),
			Order:    rapid.IntRange(0, 3).Draw(t, "order"), // duplicates exercise the name tie-break
			Deserved: amt("deserved", 10),
			// Mostly a few round weights, so that offers and fractions
			// tie; sometimes any weight.
			Weight:  rapid.OneOf(weights, weights, weights, rapid.Float64Range(0, 10)).Draw(t, "weight"),
			Limit:   amt("limit", 30),
			Request: amt("request", 40),
		}
		// Unlimited now and then: an unlimited deserved often takes the
		// whole amount in the deserved pass, leaving nothing to test.
		if rapid.IntRange(0, 4).Draw(t, "unlimited deserved") == 0 {
			qt.Deserved = fairshare.Unlimited
		}
		if rapid.IntRange(0, 1).Draw(t, "unlimited limit") == 0 {
			qt.Limit = fairshare.Unlimited
		}
		d.qs = append(d.qs, qt)
	}
	return d
}

// requestable mirrors the contract: min(request, limit).
func requestable(x fairshare.Queue) int64 {
	if x.Limit == fairshare.Unlimited {
		return x.Request
	}
	return min(x.Request, x.Limit)
}

// deservedPass is what the deserved pass guarantees: min(deserved, requestable),
// an Unlimited deserved counting as the (non-negative) amount.
func deservedPass(amount int64, x fairshare.Queue) int64 {
	d := x.Deserved
	if d == fairshare.Unlimited {
		d = max(amount, 0)
	}
	return min(d, requestable(x))
}

func TestDivideProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDivision(t)
		got := fairshare.Divide(d.amount, d.unit, d.qs)
		if len(got) != len(d.qs) {
			t.Fatalf("got %d shares for %d queues", len(got), len(d.qs))
		}
		var sum, floorSum int64
		for i, x := range d.qs {
			if got[i] > requestable(x) {
				t.Fatalf("%s: share %d above requestable %d", x.Name, got[i], requestable(x))
			}
			if f := deservedPass(d.amount, x); got[i] < f {
				t.Fatalf("%s: share %d below min(deserved, requestable) %d", x.Name, got[i], f)
			}
			if x.Weight == 0 && got[i] != deservedPass(d.amount, x) {
				t.Fatalf("%s: weight 0 but share %d above deserved pass %d", x.Name, got[i], deservedPass(d.amount, x))
			}
			sum += got[i]
			floorSum += deservedPass(d.amount, x)
		}
		// Within the amount when the deserved quotas fit in it; otherwise
		// only the deserved pass may overshoot and nothing is added to it.
		if floorSum <= d.amount && sum > d.amount {
			t.Fatalf("shares add up to %d, above amount %d", sum, d.amount)
		}
		if floorSum > d.amount && sum != floorSum {
			t.Fatalf("deserved pass used %d of %d but shares add up to %d", floorSum, d.amount, sum)
		}
		// Not wasteful: while a weighted queue still wants more, less than
		// one unit per queue stays undivided.
		if undivided := d.amount - sum; undivided > d.unit*int64(len(d.qs)) {
			for i, x := range d.qs {
				if x.Weight > 0 && got[i] < requestable(x) {
					t.Fatalf("%d undivided while %s holds %d of %d", undivided, x.Name, got[i], requestable(x))
				}
			}
		}
	})
}

func TestDivideIgnoresInputOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDivision(t)
		shuffled := rapid.Permutation(d.qs).Draw(t, "shuffled")
		byName := func(qs []fairshare.Queue, shares []int64) map[string]int64 {
			m := make(map[string]int64, len(qs))
			for i, x := range qs {
				m[x.Name] = shares[i]
			}
			return m
		}
		want := byName(d.qs, fairshare.Divide(d.amount, d.unit, d.qs))
		got := byName(shuffled, fairshare.Divide(d.amount, d.unit, shuffled))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("shares depend on input order (-original +shuffled):\n%s", diff)
		}
	})
}

func TestDivideIsDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := genDivision(t)
		in := append([]fairshare.Queue(nil), d.qs...)
		first := fairshare.Divide(d.amount, d.unit, d.qs)
		if diff := cmp.Diff(in, d.qs); diff != "" {
			t.Fatalf("Divide modified its input (-before +after):\n%s", diff)
		}
		for range 3 {
			if diff := cmp.Diff(first, fairshare.Divide(d.amount, d.unit, d.qs)); diff != "" {
				t.Fatalf("Divide is not deterministic (-first +again):\n%s", diff)
			}
		}
	})
}
