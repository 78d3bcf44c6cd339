package history

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
)

// Source answers PromQL over history: the embedded Store, or Remote.
type Source interface {
	// Range evaluates q from start to end every step (at most MaxPoints).
	Range(ctx context.Context, q string, start, end time.Time, step time.Duration) (model.Matrix, error)
	// Instant evaluates q at t.
	Instant(ctx context.Context, q string, t time.Time) (model.Vector, error)
	// Samples are the raw samples, at the times they were taken, of the
	// series selector matches in (start, end] (staleness markers left
	// out): what integrating over the samples' own timestamps needs,
	// whatever the interval the store sampled at.
	Samples(ctx context.Context, selector string, start, end time.Time) (model.Matrix, error)
}

// samplesQuery is the instant query, at end, of the raw samples in
// (start, end].
func samplesQuery(selector string, start, end time.Time) (string, error) {
	if !end.After(start) {
		return "", &QueryError{Bad: true, Err: errors.New("samples: the end is not after the start")}
	}
	return selector + "[" + model.Duration(end.Sub(start)).String() + "]", nil
}

// Samples implements Source.
func (s *Store) Samples(ctx context.Context, selector string, start, end time.Time) (model.Matrix, error) {
	q, err := samplesQuery(selector, start, end)
	if err != nil {
		return nil, err
	}
	v, err := s.Query(ctx, q, end)
	if err != nil {
		return nil, err
	}
	m, ok := v.(promql.Matrix)
	if !ok {
		return nil, &QueryError{Bad: true, Err: fmt.Errorf("samples of %s: a %s, not a range vector", selector, v.Type())}
	}
	return matrix(m), nil
}

// Range implements Source.
func (s *Store) Range(ctx context.Context, q string, start, end time.Time, step time.Duration) (model.Matrix, error) {
	v, err := s.QueryRange(ctx, q, start, end, step)
	if err != nil {
		return nil, err
	}
	m, ok := v.(promql.Matrix)
	if !ok {
		return nil, &QueryError{Bad: true, Err: fmt.Errorf("the query gives a %s, not a range vector", v.Type())}
	}
	return matrix(m), nil
}

// Instant implements Source.
func (s *Store) Instant(ctx context.Context, q string, t time.Time) (model.Vector, error) {
	v, err := s.Query(ctx, q, t)
	if err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case promql.Vector:
		out := make(model.Vector, 0, len(v))
		for _, p := range v {
			out = append(out, &model.Sample{Metric: metric(p.Metric), Timestamp: model.Time(p.T), Value: model.SampleValue(p.F)})
		}
		return out, nil
	case promql.Scalar:
		return model.Vector{{Metric: model.Metric{}, Timestamp: model.Time(v.T), Value: model.SampleValue(v.V)}}, nil
	}
	return nil, &QueryError{Bad: true, Err: fmt.Errorf("the query gives a %s, not an instant vector", v.Type())}
}

// matrix is the engine's range vector as the client API has it.
func matrix(m promql.Matrix) model.Matrix {
	out := make(model.Matrix, 0, len(m))
	for _, s := range m {
		ss := &model.SampleStream{Metric: metric(s.Metric), Values: make([]model.SamplePair, 0, len(s.Floats))}
		for _, p := range s.Floats {
			ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.Time(p.T), Value: model.SampleValue(p.F)})
		}
		out = append(out, ss)
	}
	return out
}

func metric(ls labels.Labels) model.Metric {
	m := make(model.Metric, ls.Len())
	ls.Range(func(l labels.Label) { m[model.LabelName(l.Name)] = model.LabelValue(l.Value) })
	return m
}

// Remote is an external Prometheus-compatible server (--prometheus-url):
// the same queries, over its HTTP API.
type Remote struct {
	api promv1.API
}

// NewRemote reads from the server at url; rt carries its requests (nil:
// http.DefaultTransport), for example adding a bearer token.
func NewRemote(url string, rt http.RoundTripper) (*Remote, error) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	c, err := api.NewClient(api.Config{Address: url, RoundTripper: rt})
	if err != nil {
		return nil, fmt.Errorf("--prometheus-url: %w", err)
	}
	return &Remote{api: promv1.NewAPI(c)}, nil
}

// Range implements Source.
func (r *Remote) Range(ctx context.Context, q string, start, end time.Time, step time.Duration) (model.Matrix, error) {
	if err := checkRange(start, end, step); err != nil {
		return nil, err
	}
	v, _, _, err := r.api.QueryRange(ctx, q, promv1.Range{Start: start, End: end, Step: step})
	if err != nil {
		return nil, remoteError(err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, &QueryError{Bad: true, Err: fmt.Errorf("the query gives a %s, not a range vector", v.Type())}
	}
	return m, nil
}

// Samples implements Source.
func (r *Remote) Samples(ctx context.Context, selector string, start, end time.Time) (model.Matrix, error) {
	q, err := samplesQuery(selector, start, end)
	if err != nil {
		return nil, err
	}
	v, _, _, err := r.api.Query(ctx, q, end)
	if err != nil {
		return nil, remoteError(err)
	}
	m, ok := v.(model.Matrix)
	if !ok {
		return nil, &QueryError{Bad: true, Err: fmt.Errorf("samples of %s: a %s, not a range vector", selector, v.Type())}
	}
	return m, nil
}

// Instant implements Source.
func (r *Remote) Instant(ctx context.Context, q string, t time.Time) (model.Vector, error) {
	v, _, _, err := r.api.Query(ctx, q, t)
	if err != nil {
		return nil, remoteError(err)
	}
	switch v := v.(type) {
	case model.Vector:
		return v, nil
	case *model.Scalar:
		return model.Vector{{Metric: model.Metric{}, Timestamp: v.Timestamp, Value: v.Value}}, nil
	}
	return nil, &QueryError{Bad: true, Err: fmt.Errorf("the query gives a %s, not an instant vector", v.Type())}
}

// remoteError keeps a server's bad_data as a malformed query.
func remoteError(err error) error {
	var pe *promv1.Error
	if errors.As(err, &pe) {
		return &QueryError{Bad: pe.Type == promv1.ErrBadData, Err: fmt.Errorf("prometheus: %w", err)}
	}
	return fmt.Errorf("prometheus: %w", err)
}
