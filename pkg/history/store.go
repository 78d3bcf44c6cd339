package history

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// Defaults of `runway dev`.
const (
	DefaultInterval  = 15 * time.Second
	DefaultRetention = 15 * 24 * time.Hour
)

// Bounds on what one query may cost.
const (
	// MaxPoints is the most points a range query may return per series
	// (Prometheus's own bound).
	MaxPoints = 11000
	// MaxSamples bounds the samples one query may hold in memory.
	MaxSamples = 50_000_000
	// QueryTimeout bounds one query's evaluation by default.
	QueryTimeout = 30 * time.Second
)

// Config opens a Store.
type Config struct {
	// Dir is the TSDB's directory (created if missing). Required.
	Dir string
	// Retention is how long samples are kept (DefaultRetention when 0):
	// blocks entirely older than the newest sample minus it are deleted.
	Retention time.Duration
	// BlockDuration is the head's block length (tsdb's 2 h when 0; tests
	// shorten it).
	BlockDuration time.Duration
	// QueryTimeout bounds one query's evaluation (QueryTimeout when 0);
	// what computes reports in the background may allow more.
	QueryTimeout time.Duration
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
}

// selectorParser parses the match[] selectors of series and labels.
var selectorParser = parser.NewParser(parser.Options{})

// Store is an open TSDB and its query engine.
type Store struct {
	db     *tsdb.DB
	engine *promql.Engine
	log    *slog.Logger

	mu   sync.Mutex               // one gathering at a time
	last map[uint64]labels.Labels // the series of the last gathering
}

// Open opens (or creates) the TSDB in cfg.Dir, replaying its write-ahead
// log, so history survives restarts.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("history: no directory")
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.Retention < 0 {
		return nil, errors.New("history: the retention must be positive")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = QueryTimeout
	}
	opts := tsdb.DefaultOptions()
	opts.RetentionDuration = cfg.Retention.Milliseconds()
	if cfg.BlockDuration > 0 {
		opts.MinBlockDuration = cfg.BlockDuration.Milliseconds()
		opts.MaxBlockDuration = cfg.BlockDuration.Milliseconds()
	}
	// Every tenant's series: the directory is its owner's alone (the TSDB
	// would make it, and its files, readable by all), however it was made.
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if err := os.Chmod(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	db, err := tsdb.Open(cfg.Dir, internalLogger(cfg.Logger, "tsdb"), nil, opts, nil)
	if err != nil {
		return nil, fmt.Errorf("history: open %s: %w", cfg.Dir, err)
	}
	engine := promql.NewEngine(promql.EngineOpts{Logger: internalLogger(cfg.Logger, "promql"),
		MaxSamples: MaxSamples, Timeout: cfg.QueryTimeout, LookbackDelta: 5 * time.Minute,
		EnableAtModifier: true, EnableNegativeOffset: true})
	return &Store{db: db, engine: engine, log: cfg.Logger}, nil
}

// Close flushes and closes the TSDB.
func (s *Store) Close() error { return s.db.Close() }

// Append writes one gathering of families at t; it returns the number of
// samples written. A series of the previous gathering that is missing from
// this one gets a staleness marker, as a Prometheus scrape does, so that a
// pod that left stops counting at once rather than for the lookback.
func (s *Store) Append(ctx context.Context, t time.Time, mfs []*dto.MetricFamily) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	app := s.db.Appender(ctx)
	ts := t.UnixMilli()
	n := 0
	seen := make(map[uint64]labels.Labels, len(s.last))
	var b labels.ScratchBuilder
	add := func(name string, m *dto.Metric, v float64, extra ...string) error {
		b.Reset()
		b.Add(labels.MetricName, name)
		for _, l := range m.GetLabel() {
			b.Add(l.GetName(), l.GetValue())
		}
		for i := 0; i+1 < len(extra); i += 2 {
			b.Add(extra[i], extra[i+1])
		}
		b.Sort()
		ls := b.Labels()
		if _, err := app.Append(0, ls, ts, v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		seen[ls.Hash()] = ls
		n++
		return nil
	}
	err := func() error {
		for _, mf := range mfs {
			name := mf.GetName()
			for _, m := range mf.GetMetric() {
				var err error
				switch mf.GetType() {
				case dto.MetricType_GAUGE:
					err = add(name, m, m.GetGauge().GetValue())
				case dto.MetricType_COUNTER:
					err = add(name, m, m.GetCounter().GetValue())
				case dto.MetricType_UNTYPED:
					err = add(name, m, m.GetUntyped().GetValue())
				case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
					err = addHistogram(add, name, m)
				case dto.MetricType_SUMMARY:
					err = addSummary(add, name, m)
				}
				if err != nil {
					return err
				}
			}
		}
		for h, ls := range s.last {
			if _, ok := seen[h]; !ok {
				if _, err := app.Append(0, ls, ts, math.Float64frombits(value.StaleNaN)); err != nil {
					return fmt.Errorf("staleness marker: %w", err)
				}
			}
		}
		return nil
	}()
	if err != nil {
		_ = app.Rollback()
		return 0, fmt.Errorf("history: append: %w", err)
	}
	if err := app.Commit(); err != nil {
		return 0, fmt.Errorf("history: commit: %w", err)
	}
	s.last = seen
	return n, nil
}

type addFunc func(name string, m *dto.Metric, v float64, extra ...string) error

func addHistogram(add addFunc, name string, m *dto.Metric) error {
	h := m.GetHistogram()
	inf := false
	for _, bk := range h.GetBucket() {
		ub := bk.GetUpperBound()
		inf = inf || math.IsInf(ub, 1)
		if err := add(name+"_bucket", m, float64(bk.GetCumulativeCount()), "le", formatFloat(ub)); err != nil {
			return err
		}
	}
	if !inf {
		if err := add(name+"_bucket", m, float64(h.GetSampleCount()), "le", "+Inf"); err != nil {
			return err
		}
	}
	if err := add(name+"_sum", m, h.GetSampleSum()); err != nil {
		return err
	}
	return add(name+"_count", m, float64(h.GetSampleCount()))
}

func addSummary(add addFunc, name string, m *dto.Metric) error {
	sm := m.GetSummary()
	for _, q := range sm.GetQuantile() {
		if err := add(name, m, q.GetValue(), "quantile", formatFloat(q.GetQuantile())); err != nil {
			return err
		}
	}
	if err := add(name+"_sum", m, sm.GetSampleSum()); err != nil {
		return err
	}
	return add(name+"_count", m, float64(sm.GetSampleCount()))
}

// formatFloat writes a bucket bound or quantile as Prometheus does.
func formatFloat(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Collect gathers g into the store every interval until ctx ends, stamping
// each gathering with now(). A failed gathering or append is logged and
// the next one goes on.
func (s *Store) Collect(ctx context.Context, g prometheus.Gatherer, interval time.Duration, now func() time.Time) error {
	if interval <= 0 {
		return errors.New("history: the collection interval must be positive")
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		s.CollectOnce(ctx, g, now())
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// CollectOnce gathers g into the store at t.
func (s *Store) CollectOnce(ctx context.Context, g prometheus.Gatherer, t time.Time) {
	mfs, err := g.Gather()
	if err != nil {
		s.log.Warn("history: gather", "err", err) // a partial gathering is still written
	}
	if _, err := s.Append(ctx, t, mfs); err != nil {
		s.log.Warn("history: collect", "err", err)
	}
}

// Query evaluates an instant PromQL query at t.
func (s *Store) Query(ctx context.Context, q string, t time.Time) (parser.Value, error) {
	qry, err := s.engine.NewInstantQuery(ctx, s.db, nil, q, t)
	if err != nil {
		return nil, badQuery(err)
	}
	defer qry.Close()
	return result(qry.Exec(ctx))
}

// QueryRange evaluates a PromQL range query; at most MaxPoints steps.
func (s *Store) QueryRange(ctx context.Context, q string, start, end time.Time, step time.Duration) (parser.Value, error) {
	if err := checkRange(start, end, step); err != nil {
		return nil, err
	}
	qry, err := s.engine.NewRangeQuery(ctx, s.db, nil, q, start, end, step)
	if err != nil {
		return nil, badQuery(err)
	}
	defer qry.Close()
	return result(qry.Exec(ctx))
}

// checkRange bounds a range query: end after start, a positive step, at
// most MaxPoints points.
func checkRange(start, end time.Time, step time.Duration) error {
	switch {
	case step <= 0:
		return &QueryError{Bad: true, Err: errors.New("step must be positive")}
	case end.Before(start):
		return &QueryError{Bad: true, Err: errors.New("end is before start")}
	case end.Sub(start)/step >= MaxPoints:
		return &QueryError{Bad: true, Err: fmt.Errorf("more than %d points per series: raise step", MaxPoints)}
	}
	return nil
}

func result(r *promql.Result) (parser.Value, error) {
	if r.Err != nil {
		return nil, &QueryError{Err: r.Err}
	}
	return r.Value, nil
}

// QueryError is a query that could not run: malformed (Bad) or failed in
// evaluation (too many samples, timeout, cancelled).
type QueryError struct {
	Bad bool
	Err error
}

func (e *QueryError) Error() string { return e.Err.Error() }
func (e *QueryError) Unwrap() error { return e.Err }

func badQuery(err error) error { return &QueryError{Bad: true, Err: err} }

// Series lists the label sets of the series matching any of the selectors
// between start and end.
func (s *Store) Series(ctx context.Context, selectors []string, start, end time.Time) ([]labels.Labels, error) {
	q, sets, err := s.selectAll(ctx, selectors, start, end)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	var out []labels.Labels
	seen := map[uint64]bool{}
	for _, set := range sets {
		for set.Next() {
			l := set.At().Labels()
			if h := l.Hash(); !seen[h] {
				seen[h] = true
				out = append(out, l)
			}
		}
		if err := set.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LabelNames lists the label names between start and end, of the series
// matching any selector (all series when none).
func (s *Store) LabelNames(ctx context.Context, selectors []string, start, end time.Time) ([]string, error) {
	if len(selectors) == 0 {
		q, err := s.db.Querier(start.UnixMilli(), end.UnixMilli())
		if err != nil {
			return nil, err
		}
		defer q.Close()
		names, _, err := q.LabelNames(ctx, nil)
		return names, err
	}
	series, err := s.Series(ctx, selectors, start, end)
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, l := range series {
		l.Range(func(l labels.Label) { set[l.Name] = true })
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// selectAll opens a querier over [start, end] and selects each selector.
func (s *Store) selectAll(ctx context.Context, selectors []string, start, end time.Time) (storage.Querier, []storage.SeriesSet, error) {
	if len(selectors) == 0 {
		return nil, nil, badQuery(errors.New("no match[] selector"))
	}
	q, err := s.db.Querier(start.UnixMilli(), end.UnixMilli())
	if err != nil {
		return nil, nil, err
	}
	var sets []storage.SeriesSet
	for _, sel := range selectors {
		ms, err := selectorParser.ParseMetricSelector(sel)
		if err != nil {
			q.Close()
			return nil, nil, badQuery(err)
		}
		sets = append(sets, q.Select(ctx, false, &storage.SelectHints{Start: start.UnixMilli(), End: end.UnixMilli(), Func: "series"}, ms...))
	}
	return q, sets, nil
}

// DB is the underlying TSDB (blocks, compaction), for tests and benchmarks.
func (s *Store) DB() *tsdb.DB { return s.db }
