package metrics

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/prometheus/common/model"

	"github.com/runwayhq/runway/pkg/history"
)

// Reports integrate each series over its samples' own timestamps, so that
// a store scraping every 15 s and one scraping every 30 s (an external
// Prometheus) give the same hours for the same activity: a sample stands
// for the time until the series' next sample when that comes within
// lookback (the series was there all along, as PromQL's lookback has it;
// a missed scrape changes nothing), and for one of the series' own
// intervals (its shortest gap) when it is the last of a run: the series
// ended, or went for longer than lookback (the workload held nothing).
const lookback = 5 * time.Minute

// maxChunkSamples bounds the raw samples one query of a report returns: a
// window holding more is read in consecutive pieces.
const maxChunkSamples = 1_000_000

// integral is one series' integral, built from its samples in time order:
// value-seconds, and (allocated GPUs) the same weighted by the workload's
// GPU utilisation at each sample.
type integral struct {
	gap      time.Duration // the series' interval: its shortest gap so far (0 until two samples)
	present  float64       // Σ v·gap over the gaps within lookback
	ends     float64       // Σ v of the samples that end a run (each stands for one interval)
	presentU float64       // the same, times the utilisation at the sample
	endsU    float64
	last     model.SamplePair
	lastU    float64
	any      bool
}

func (a *integral) add(p model.SamplePair, util float64) {
	if a.any {
		g := p.Timestamp.Sub(a.last.Timestamp)
		if g <= 0 {
			return // samples come in time order; a repeated one adds nothing
		}
		if a.gap == 0 || g < a.gap {
			a.gap = g
		}
		v := float64(a.last.Value)
		if g <= lookback {
			a.present += v * g.Seconds()
			a.presentU += v * a.lastU * g.Seconds()
		} else {
			a.ends += v
			a.endsU += v * a.lastU
		}
	}
	a.last, a.lastU, a.any = p, util, true
}

// seconds is the integral up to end: the last sample stands for one
// interval, but not past end; fallback is the interval of a series of one
// sample.
func (a *integral) seconds(end time.Time, fallback time.Duration) (v, used float64) {
	if !a.any {
		return 0, 0
	}
	d := a.gap
	if d == 0 {
		d = fallback
	}
	tail := min(d, end.Sub(a.last.Timestamp.Time()))
	lv := float64(a.last.Value)
	return a.present + a.ends*d.Seconds() + lv*tail.Seconds(), a.presentU + a.endsU*d.Seconds() + lv*a.lastU*tail.Seconds()
}

// pieces splits (start, end] so that each piece holds at most
// maxChunkSamples samples of the selectors together, by their count.
func pieces(ctx context.Context, src history.Source, sels []string, start, end time.Time) ([][2]time.Time, error) {
	total := 0.0
	for _, sel := range sels {
		v, err := src.Instant(ctx, fmt.Sprintf(`sum(count_over_time(%s[%s]))`, sel, model.Duration(end.Sub(start))), end)
		if err != nil {
			return nil, err
		}
		for _, s := range v {
			total += float64(s.Value)
		}
	}
	n := max(1, int(math.Ceil(total/maxChunkSamples)))
	d := (end.Sub(start) / time.Duration(n)).Truncate(time.Millisecond)
	if d < time.Millisecond { // more samples than milliseconds: one a millisecond
		d, n = time.Millisecond, max(1, int(end.Sub(start)/time.Millisecond))
	}
	out := make([][2]time.Time, 0, n)
	for i := range n {
		out = append(out, [2]time.Time{start.Add(time.Duration(i) * d), start.Add(time.Duration(i+1) * d)})
	}
	out[n-1][1] = end // d was truncated: the last piece ends the window
	return out, nil
}

// workloadOf is a series' workload, the join of allocation and
// utilisation.
type workloadKey struct{ project, workload string }

func workloadOf(m model.Metric) workloadKey {
	return workloadKey{string(m["project"]), string(m["workload"])}
}

// utilisation follows the GPU utilisation series of each workload (one per
// pod and device) through the pieces: the workload's utilisation at t is
// the mean of its series' latest samples at or before t, within lookback.
type utilisation struct {
	latest map[workloadKey]map[model.Fingerprint]model.SamplePair // carried from piece to piece
}

// event is one utilisation sample of a workload, in a piece.
type event struct {
	fp model.Fingerprint
	p  model.SamplePair
}

// timeline is a piece's utilisation samples per workload, in time order.
func (u *utilisation) timeline(m model.Matrix) map[workloadKey][]event {
	out := map[workloadKey][]event{}
	for _, s := range m {
		k := workloadOf(s.Metric)
		fp := s.Metric.Fingerprint()
		for _, p := range s.Values {
			out[k] = append(out[k], event{fp, p})
		}
	}
	for k := range out {
		sort.SliceStable(out[k], func(i, j int) bool { return out[k][i].p.Timestamp < out[k][j].p.Timestamp })
	}
	return out
}

// walk integrates one allocation series' samples of a piece, weighting
// each by the workload's utilisation then, from a copy of the carried
// state.
func (u *utilisation) walk(a *integral, samples []model.SamplePair, k workloadKey, events []event) {
	cur := map[model.Fingerprint]model.SamplePair{}
	for fp, p := range u.latest[k] {
		cur[fp] = p
	}
	i := 0
	for _, p := range samples {
		for ; i < len(events) && events[i].p.Timestamp <= p.Timestamp; i++ {
			cur[events[i].fp] = events[i].p
		}
		sum, n := 0.0, 0
		for _, q := range cur {
			if p.Timestamp.Sub(q.Timestamp) <= lookback && !math.IsNaN(float64(q.Value)) {
				sum += float64(q.Value)
				n++
			}
		}
		util := 0.0
		if n > 0 {
			util = sum / float64(n)
		}
		a.add(p, util)
	}
}

// carry keeps each utilisation series' latest sample for the next piece.
func (u *utilisation) carry(events map[workloadKey][]event) {
	for k, evs := range events {
		m := u.latest[k]
		if m == nil {
			m = map[model.Fingerprint]model.SamplePair{}
			u.latest[k] = m
		}
		for _, e := range evs {
			m[e.fp] = e.p
		}
	}
}
