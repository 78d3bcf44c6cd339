package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// API serves the store as Prometheus's HTTP query API: GET or POST
// /api/v1/query, /api/v1/query_range, /api/v1/series and /api/v1/labels,
// answering in Prometheus's JSON envelope ({"status": "success", "data":
// ...} or {"status": "error", "errorType": ..., "error": ...}).
func (s *Store) API() map[string]http.Handler {
	return map[string]http.Handler{
		"/api/v1/query":       http.HandlerFunc(s.serveQuery),
		"/api/v1/query_range": http.HandlerFunc(s.serveQueryRange),
		"/api/v1/series":      http.HandlerFunc(s.serveSeries),
		"/api/v1/labels":      http.HandlerFunc(s.serveLabels),
	}
}

// maxBody bounds a POSTed form.
const maxBody = 1 << 20

func (s *Store) serveQuery(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	t, err := parseTime(r.FormValue("time"), time.Now())
	if err != nil {
		fail(w, badParam("time", err))
		return
	}
	v, err := s.Query(r.Context(), r.FormValue("query"), t)
	if err != nil {
		fail(w, err)
		return
	}
	succeed(w, queryData{Type: v.Type(), Result: v})
}

func (s *Store) serveQueryRange(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	start, err := parseTime(r.FormValue("start"), time.Time{})
	if err != nil {
		fail(w, badParam("start", err))
		return
	}
	end, err := parseTime(r.FormValue("end"), time.Time{})
	if err != nil {
		fail(w, badParam("end", err))
		return
	}
	step, err := parseStep(r.FormValue("step"))
	if err != nil {
		fail(w, badParam("step", err))
		return
	}
	v, err := s.QueryRange(r.Context(), r.FormValue("query"), start, end, step)
	if err != nil {
		fail(w, err)
		return
	}
	succeed(w, queryData{Type: v.Type(), Result: v})
}

func (s *Store) serveSeries(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	start, end, err := window(r)
	if err != nil {
		fail(w, err)
		return
	}
	series, err := s.Series(r.Context(), r.Form["match[]"], start, end)
	if err != nil {
		fail(w, err)
		return
	}
	if series == nil {
		series = []labels.Labels{}
	}
	succeed(w, series)
}

func (s *Store) serveLabels(w http.ResponseWriter, r *http.Request) {
	if !parseForm(w, r) {
		return
	}
	start, end, err := window(r)
	if err != nil {
		fail(w, err)
		return
	}
	names, err := s.LabelNames(r.Context(), r.Form["match[]"], start, end)
	if err != nil {
		fail(w, err)
		return
	}
	if names == nil {
		names = []string{}
	}
	succeed(w, names)
}

// window is the optional start and end of series and labels: all time by
// default.
func window(r *http.Request) (time.Time, time.Time, error) {
	start, err := parseTime(r.FormValue("start"), time.UnixMilli(math.MinInt64/2))
	if err != nil {
		return start, start, badParam("start", err)
	}
	end, err := parseTime(r.FormValue("end"), time.UnixMilli(math.MaxInt64/2))
	if err != nil {
		return start, end, badParam("end", err)
	}
	return start, end, nil
}

type queryData struct {
	Type   parser.ValueType `json:"resultType"`
	Result parser.Value     `json:"result"`
}

func parseForm(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		fail(w, badParam("form", err))
		return false
	}
	return true
}

// parseTime reads a Unix time in seconds (fractions allowed) or RFC 3339;
// def when empty (a zero def makes it required).
func parseTime(s string, def time.Time) (time.Time, error) {
	if s == "" {
		if def.IsZero() {
			return def, errors.New("required")
		}
		return def, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, fmt.Errorf("%q is neither Unix seconds nor RFC 3339", s)
	}
	return t, nil
}

// parseStep reads seconds (fractions allowed) or a Prometheus duration.
func parseStep(s string) (time.Duration, error) {
	if s == "" {
		return 0, errors.New("required")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := model.ParseDuration(s)
	return time.Duration(d), err
}

func badParam(name string, err error) error {
	return &QueryError{Bad: true, Err: fmt.Errorf("invalid parameter %q: %w", name, err)}
}

func succeed(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": data})
}

// fail answers as Prometheus does: 400 bad_data for a malformed request,
// 422 execution for a query that failed, 503 timeout, 500 otherwise.
func fail(w http.ResponseWriter, err error) {
	code, typ := http.StatusInternalServerError, "internal"
	var qe *QueryError
	switch {
	case errors.As(err, &qe) && qe.Bad:
		code, typ = http.StatusBadRequest, "bad_data"
	case errors.As(err, new(promql.ErrQueryTimeout)):
		code, typ = http.StatusServiceUnavailable, "timeout"
	case errors.As(err, &qe):
		code, typ = http.StatusUnprocessableEntity, "execution"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": "error", "errorType": typ, "error": err.Error()})
}
