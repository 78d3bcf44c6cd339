package fairshare_test

import (
	"flag"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/fairshare"
)

// Divide starts no goroutines; goleak keeps it that way.
func TestMain(m *testing.M) {
	// The properties' interesting cases (fractions that tie, a leftover
	// capped by the ask) show up once in a few hundred draws, so run 1000
	// rather than rapid's default 100 unless -rapid.checks says otherwise.
	// Each check takes microseconds.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		if err := flag.Set("rapid.checks", "1000"); err != nil {
			panic(err)
		}
	}
	goleak.VerifyTestMain(m)
}

const (
	G   = 1000 // one GPU in milli-GPUs
	inf = fairshare.Unlimited
)

// q builds a queue with no limit; cases override fields as needed.
func q(name string, order int, deserved int64, w float64, request int64) fairshare.Queue {
	return fairshare.Queue{Name: name, Order: order, Deserved: deserved, Weight: w, Limit: inf, Request: request}
}

func limited(x fairshare.Queue, limit int64) fairshare.Queue {
	x.Limit = limit
	return x
}

func TestDivide(t *testing.T) {
	tests := map[string]struct {
		amount, unit int64
		qs           []fairshare.Queue
		want         []int64
	}{
		"the documentation's example gives 17, 16, 3 with the last GPU to the largest fraction": {
			amount: 36 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 10*G, 2, 30*G), q("b", 1, 6*G, 3, 30*G), q("c", 2, 0, 1, 30*G)},
			want: []int64{17 * G, 16 * G, 3 * G},
		},
		"a queue satisfied below its offer triggers a second round that replaces fractions": {
			amount: 36 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 10*G, 2, 30*G), q("b", 1, 6*G, 3, 30*G), q("c", 2, 0, 1, 2*G)},
			want: []int64{17 * G, 17 * G, 2 * G},
		},
		"two queues with weights 1 and 4 split 7 leftover GPUs as 1 and 5 plus the last to 0.6": {
			amount: 11 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 2*G, 1, 100*G), q("b", 1, 2*G, 4, 100*G)},
			want: []int64{3 * G, 8 * G},
		},
		"a request below deserved caps the share and frees the rest for others": {
			amount: 10 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 6*G, 1, 2*G), q("b", 1, 0, 1, 100*G)},
			want: []int64{2 * G, 8 * G},
		},
		"a limit caps the share and what it leaves goes to others in a later round": {
			amount: 20 * G, unit: G,
			qs:   []fairshare.Queue{limited(q("a", 0, 2*G, 1, 100*G), 5*G), q("b", 1, 2*G, 1, 100*G)},
			want: []int64{5 * G, 15 * G},
		},
		"a limit below deserved caps the deserved pass": {
			amount: 20 * G, unit: G,
			qs:   []fairshare.Queue{limited(q("a", 0, 6*G, 1, 100*G), 3*G), q("b", 1, 0, 0, 0)},
			want: []int64{3 * G, 0},
		},
		"overQuota false folded into limit = deserved keeps the queue at deserved": {
			amount: 20 * G, unit: G,
			qs:   []fairshare.Queue{limited(q("a", 0, 4*G, 5, 100*G), 4*G), q("b", 1, 0, 1, 100*G)},
			want: []int64{4 * G, 16 * G},
		},
		"weight 0 is never offered anything over quota": {
			amount: 20 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 2*G, 0, 100*G), q("b", 1, 2*G, 1, 100*G)},
			want: []int64{2 * G, 18 * G},
		},
		"all weights 0 leave the rest undivided": {
			amount: 20 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 2*G, 0, 100*G), q("b", 1, 3*G, 0, 100*G)},
			want: []int64{2 * G, 3 * G},
		},
		"unlimited deserved counts as the whole amount": {
			amount: 10 * G, unit: G,
			qs:   []fairshare.Queue{q("default", 0, inf, 1, 100*G)},
			want: []int64{10 * G},
		},
		"unlimited deserved queues asking little get what they ask": {
			amount: 10 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, inf, 1, 3*G), q("b", 1, inf, 1, 5*G)},
			want: []int64{3 * G, 5 * G},
		},
		"unlimited deserved with a limit is capped by the limit": {
			amount: 10 * G, unit: G,
			qs:   []fairshare.Queue{limited(q("a", 0, inf, 1, 100*G), 4*G), q("b", 1, 0, 1, 100*G)},
			want: []int64{4 * G, 6 * G},
		},
		"all unlimited siblings each get min(amount, request) and nothing is scaled down": {
			amount: 10 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, inf, 1, 100*G), q("b", 1, inf, 1, 4*G)},
			want: []int64{10 * G, 4 * G},
		},
		"a fractional request is satisfied exactly and the half unit left goes out as a leftover": {
			amount: 4 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 0, 1, 1500), q("b", 1, 0, 1, 10*G)},
			want: []int64{1500, 2500},
		},
		"a leftover grant is capped by what the queue still asks": {
			amount: 3800, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 0, 1, 1950), q("b", 1, 0, 1, 100*G)},
			want: []int64{1950, 1850},
		},
		"an amount below the deserved sum is not scaled down": {
			amount: 5 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 4*G, 1, 10*G), q("b", 1, 3*G, 1, 2*G), q("c", 2, 6*G, 1, 10*G)},
			want: []int64{4 * G, 2 * G, 6 * G},
		},
		"equal fractions go to the queue created first": {
			amount: 1 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 1, 0, 1, 10*G), q("b", 0, 0, 1, 10*G)},
			want: []int64{0, 1 * G},
		},
		"equal fractions and creation order go to the first name": {
			amount: 1 * G, unit: G,
			qs:   []fairshare.Queue{q("b", 0, 0, 1, 10*G), q("a", 0, 0, 1, 10*G)},
			want: []int64{0, 1 * G},
		},
		"leftovers go out one unit per queue until nothing is left": {
			// Offers of 0.9 each: nobody takes a whole unit in the round.
			amount: 2700, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 0, 1, 10*G), q("b", 1, 0, 1, 10*G), q("c", 2, 0, 1, 10*G)},
			want: []int64{G, G, 700},
		},
		"unit 1 divides to the milli-unit": {
			amount: 10, unit: 1,
			qs:   []fairshare.Queue{q("a", 0, 0, 1, 100), q("b", 1, 0, 2, 100)},
			want: []int64{3, 7},
		},
		"a unit of 0 counts as 1": {
			amount: 10, unit: 0,
			qs:   []fairshare.Queue{q("a", 0, 0, 1, 100), q("b", 1, 0, 2, 100)},
			want: []int64{3, 7},
		},
		"an amount of 0 gives only deserved within requests": {
			amount: 0, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 2*G, 1, 10*G), q("b", 1, inf, 1, 10*G), q("c", 2, 0, 1, 10*G)},
			want: []int64{2 * G, 0, 0},
		},
		"a negative amount counts as 0": {
			amount: -5 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, inf, 1, 10*G), q("b", 1, 0, 1, 10*G)},
			want: []int64{0, 0},
		},
		"bad weights, requests and limits are normalised instead of failing": {
			// NaN, negative and infinite weights count as 0, a negative
			// request as 0, a negative limit other than Unlimited as 0.
			amount: 10 * G, unit: G,
			qs: []fairshare.Queue{
				q("a", 0, 1*G, math.NaN(), 100*G), q("b", 1, 1*G, -2, 100*G),
				q("c", 2, 1*G, math.Inf(1), 100*G), q("d", 3, 5*G, 1, -3*G),
				limited(q("e", 4, 5*G, 1, 100*G), -7), q("f", 5, 0, 1, 100*G),
			},
			want: []int64{1 * G, 1 * G, 1 * G, 0, 0, 7 * G},
		},
		"no queues gives no shares": {
			amount: 10 * G, unit: G,
			qs:   nil,
			want: []int64{},
		},
		"queues asking nothing get nothing": {
			amount: 10 * G, unit: G,
			qs:   []fairshare.Queue{q("a", 0, 5*G, 1, 0), q("b", 1, inf, 1, 0)},
			want: []int64{0, 0},
		},
		"shares are index-aligned with the input, not sorted by name": {
			amount: 36 * G, unit: G,
			qs:   []fairshare.Queue{q("c", 2, 0, 1, 30*G), q("a", 0, 10*G, 2, 30*G), q("b", 1, 6*G, 3, 30*G)},
			want: []int64{3 * G, 17 * G, 16 * G},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := append([]fairshare.Queue(nil), tc.qs...)
			got := fairshare.Divide(tc.amount, tc.unit, tc.qs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Divide(%d, %d, ...) mismatch (-want +got):\n%s", tc.amount, tc.unit, diff)
			}
			if diff := cmp.Diff(in, tc.qs, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("Divide modified its input (-before +after):\n%s", diff)
			}
		})
	}
}
