package history_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/runwayhq/runway/pkg/history"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func open(t *testing.T, cfg history.Config) *history.Store {
	t.Helper()
	cfg.Logger = quiet
	s, err := history.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// t0 is a fixed time the tests write history at.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// allocation is a registry with one gauge per project, like the
// scheduler's runway_queue_allocated_gpus, and a histogram.
type allocation struct {
	reg   *prometheus.Registry
	gpus  *prometheus.GaugeVec
	cycle prometheus.Histogram
}

func newAllocation(t *testing.T) allocation {
	a := allocation{reg: prometheus.NewRegistry(),
		gpus: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "runway_queue_allocated_gpus", Help: "GPUs."}, []string{"queue"}),
		cycle: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "runway_scheduler_cycle_duration_seconds", Help: "Cycles.",
			Buckets: []float64{0.1, 1}})}
	a.reg.MustRegister(a.gpus, a.cycle)
	return a
}

// play writes 10 minutes at one gathering a 15 s: team-a holds 3 GPUs for
// the first 5 minutes, then 2 (a1 reclaimed).
func (a allocation) play(t *testing.T, s *history.Store) {
	t.Helper()
	for i := 0; i <= 40; i++ {
		at := t0.Add(time.Duration(i) * 15 * time.Second)
		v := 3.0
		if at.Sub(t0) >= 5*time.Minute {
			v = 2
		}
		a.gpus.WithLabelValues("team-a").Set(v)
		a.cycle.Observe(0.05)
		s.CollectOnce(context.Background(), a.reg, at)
	}
}

func TestRangeQueryAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := open(t, history.Config{Dir: dir})
	newAllocation(t).play(t, s)
	check := func(s *history.Store) {
		t.Helper()
		m, err := s.Range(t.Context(), `runway_queue_allocated_gpus{queue="team-a"}`, t0, t0.Add(10*time.Minute), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || len(m[0].Values) != 11 {
			t.Fatalf("range = %v, want one series of 11 points", m)
		}
		for i, p := range m[0].Values {
			want := model.SampleValue(3)
			if i >= 5 {
				want = 2
			}
			if p.Value != want || !p.Timestamp.Time().Equal(t0.Add(time.Duration(i)*time.Minute)) {
				t.Errorf("point %d = %v, want %v at %v", i, p, want, t0.Add(time.Duration(i)*time.Minute))
			}
		}
		// Histograms are stored as a scrape has them: _bucket{le}, _count.
		v, err := s.Instant(t.Context(), `sum(runway_scheduler_cycle_duration_seconds_bucket{le="0.1"}) / sum(runway_scheduler_cycle_duration_seconds_count)`, t0.Add(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != 1 || v[0].Value != 1 {
			t.Errorf("share of cycles under 0.1 s = %v, want 1", v)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The write-ahead log brings it all back.
	s = open(t, history.Config{Dir: dir})
	defer s.Close()
	check(s)
}

// The retention deletes whole blocks older than it, counted back from the
// newest sample.
func TestRetentionDeletesOldBlocks(t *testing.T) {
	s := open(t, history.Config{Dir: t.TempDir(), Retention: 3 * time.Hour, BlockDuration: time.Hour})
	defer s.Close()
	a := newAllocation(t)
	for i := 0; i <= 12*60; i++ { // 12 hours, one a minute
		a.gpus.WithLabelValues("team-a").Set(float64(i))
		s.CollectOnce(t.Context(), a.reg, t0.Add(time.Duration(i)*time.Minute))
	}
	if err := s.DB().Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	blocks := s.DB().Blocks()
	if len(blocks) == 0 {
		t.Fatal("no block was cut")
	}
	newest := t0.Add(12 * time.Hour)
	for _, b := range blocks {
		if maxt := time.UnixMilli(b.Meta().MaxTime); maxt.Before(newest.Add(-3*time.Hour - time.Hour)) {
			t.Errorf("block [%v, %v] outlived the retention", time.UnixMilli(b.Meta().MinTime), maxt)
		}
	}
	v, err := s.Instant(t.Context(), `runway_queue_allocated_gpus`, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 0 {
		t.Errorf("a sample of hour 1 is still there: %v", v)
	}
	v, err = s.Instant(t.Context(), `runway_queue_allocated_gpus`, newest)
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0].Value != 12*60 {
		t.Errorf("the newest sample = %v, want 720", v)
	}
}

// The HTTP API answers in Prometheus's format, and a Prometheus client
// (Remote) reading it gets what the store gives directly.
func TestAPIAndRemote(t *testing.T) {
	s := open(t, history.Config{Dir: t.TempDir()})
	defer s.Close()
	newAllocation(t).play(t, s)
	mux := http.NewServeMux()
	for p, h := range s.API() {
		mux.Handle(p, h)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	get := func(path string, q url.Values) (int, map[string]any) {
		t.Helper()
		resp, err := client.Get(srv.URL + path + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	unix := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	code, body := get("/api/v1/query_range", url.Values{"query": {`runway_queue_allocated_gpus`},
		"start": {unix(t0)}, "end": {unix(t0.Add(10 * time.Minute))}, "step": {"60"}})
	data, _ := body["data"].(map[string]any)
	result, _ := data["result"].([]any)
	if code != 200 || body["status"] != "success" || data["resultType"] != "matrix" || len(result) != 1 {
		t.Fatalf("query_range: %d %v", code, body)
	}
	series := result[0].(map[string]any)
	values := series["values"].([]any)
	first := values[0].([]any)
	if len(values) != 11 || first[0].(float64) != float64(t0.Unix()) || first[1] != "3" ||
		series["metric"].(map[string]any)["queue"] != "team-a" {
		t.Errorf("query_range series %v", series)
	}
	code, body = get("/api/v1/query", url.Values{"query": {`sum(runway_queue_allocated_gpus)`}, "time": {unix(t0)}})
	if data = body["data"].(map[string]any); code != 200 || data["resultType"] != "vector" {
		t.Errorf("query: %d %v", code, body)
	}
	code, body = get("/api/v1/series", url.Values{"match[]": {`{__name__=~"runway_queue_.*"}`}})
	if list, _ := body["data"].([]any); code != 200 || len(list) != 1 {
		t.Errorf("series: %d %v", code, body)
	}
	code, body = get("/api/v1/labels", nil)
	if list, _ := body["data"].([]any); code != 200 || len(list) != 3 { // __name__, le, queue
		t.Errorf("labels: %d %v", code, body)
	}
	for _, bad := range []url.Values{
		{"query": {"sum("}, "time": {unix(t0)}},
		{"query": {"up"}, "start": {unix(t0)}, "end": {unix(t0.Add(24 * time.Hour))}, "step": {"1"}}, // > 11000 points
		{"query": {"up"}, "start": {"yesterday"}, "end": {unix(t0)}, "step": {"1"}},
	} {
		path := "/api/v1/query_range"
		if bad.Get("start") == "" {
			path = "/api/v1/query"
		}
		if code, body := get(path, bad); code != 400 || body["errorType"] != "bad_data" {
			t.Errorf("%s %v: %d %v, want 400 bad_data", path, bad, code, body)
		}
	}

	remote, err := history.NewRemote(srv.URL, client.Transport)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`runway_queue_allocated_gpus`, `sum(rate(runway_scheduler_cycle_duration_seconds_count[1m]))`} {
		want, err := s.Range(t.Context(), q, t0, t0.Add(10*time.Minute), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got, err := remote.Range(t.Context(), q, t0, t0.Add(10*time.Minute), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() || len(want) == 0 {
			t.Errorf("%s: remote\n%v\nembedded\n%v", q, got, want)
		}
	}
	// The raw samples of (2 min, 5 min]: 12 at their own times, 15 s apart,
	// the first just after the start; the same from both.
	from, to := t0.Add(2*time.Minute), t0.Add(5*time.Minute)
	want, err := s.Samples(t.Context(), `runway_queue_allocated_gpus{queue="team-a"}`, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 1 || len(want[0].Values) != 12 || !want[0].Values[0].Timestamp.Time().Equal(from.Add(15*time.Second)) ||
		!want[0].Values[11].Timestamp.Time().Equal(to) || want[0].Values[11].Value != 2 {
		t.Errorf("samples of (2 min, 5 min]: %v, want 12 from 2m15s to 5m, the last 2 GPUs", want)
	}
	got, err := remote.Samples(t.Context(), `runway_queue_allocated_gpus{queue="team-a"}`, from, to)
	if err != nil || got.String() != want.String() {
		t.Errorf("samples: remote %v (%v), embedded %v", got, err, want)
	}
	if _, err := remote.Samples(t.Context(), `runway_queue_allocated_gpus`, to, from); err == nil {
		t.Error("samples of an empty window: no error")
	}
}

// A series that leaves the registry stops at once (a staleness marker), not
// after the 5-minute lookback.
func TestSeriesThatLeaveAreStale(t *testing.T) {
	s := open(t, history.Config{Dir: t.TempDir()})
	defer s.Close()
	a := newAllocation(t)
	a.gpus.WithLabelValues("team-a").Set(1)
	a.gpus.WithLabelValues("team-b").Set(1)
	s.CollectOnce(t.Context(), a.reg, t0)
	a.gpus.DeleteLabelValues("team-a")
	s.CollectOnce(t.Context(), a.reg, t0.Add(15*time.Second))
	v, err := s.Instant(t.Context(), `count(runway_queue_allocated_gpus)`, t0.Add(16*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 1 || v[0].Value != 1 {
		t.Errorf("series counted after team-a left: %v, want 1", v)
	}
	// Its raw samples end with it: the marker is no sample.
	m, err := s.Samples(t.Context(), `runway_queue_allocated_gpus{queue="team-a"}`, t0.Add(-time.Second), t0.Add(time.Minute))
	if err != nil || len(m) != 1 || len(m[0].Values) != 1 {
		t.Errorf("team-a's samples: %v (%v), want the one before it left", m, err)
	}
}
