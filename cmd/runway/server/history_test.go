package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/runwayhq/runway/cmd/runway/server"
)

// rangeQuery asks the operations listener's /api/v1/query_range and
// returns each series' values by its queue label.
func rangeQuery(t *testing.T, addr, q string, start, end time.Time, step time.Duration) map[string][]float64 {
	t.Helper()
	v := url.Values{"query": {q}, "start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix(), 10)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	resp, err := plainHTTP.Get("http://" + addr + "/api/v1/query_range?" + v.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Data   struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Values [][2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" || body.Data.ResultType != "matrix" {
		t.Fatalf("query_range %s: %d %v %+v", q, resp.StatusCode, err, body)
	}
	out := map[string][]float64{}
	for _, s := range body.Data.Result {
		for _, p := range s.Values {
			f, _ := strconv.ParseFloat(p[1].(string), 64)
			out[s.Metric["queue"]] = append(out[s.Metric["queue"]], f)
		}
	}
	return out
}

// steps reduces a series to its distinct successive values: [3 3 2 2] is
// [3 2].
func steps(vs []float64) []float64 {
	var out []float64
	for _, v := range vs {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// TestDevHistory: runway dev keeps its own series in its TSDB; a PromQL
// range query over the HTTP API shows team-a's allocation over the quick
// start (3 GPUs, then 2 once a1 is reclaimed), and after a restart on the
// same data directory the same window still answers the same.
func TestDevHistory(t *testing.T) {
	dir := t.TempDir()
	hist := func(c *server.DevConfig) { c.History = server.HistoryConfig{Interval: 50 * time.Millisecond} }
	start := time.Now().Add(-time.Second)
	var end time.Time
	var before map[string][]float64
	q := `runway_queue_allocated_gpus{kind="project",node_pool="default"}`
	t.Run("first", func(t *testing.T) {
		addrs := make(chan string, 1)
		d := startDev(t, dir, 2, 2, withMetrics(addrs), hist)
		maddr := <-addrs
		quickStart(t, d, func() {
			eventually(t, "team-a's 3 GPUs in the history", func() string {
				got := steps(rangeQuery(t, maddr, q, start, time.Now(), 100*time.Millisecond)["team-a"])
				if len(got) == 0 || got[len(got)-1] != 3 {
					return fmt.Sprintf("team-a %v", got)
				}
				return ""
			})
		})
		eventually(t, "team-a's 3 then 2 GPUs in the history", func() string {
			end = time.Now()
			before = rangeQuery(t, maddr, q, start, end, 100*time.Millisecond)
			// a1 and a2 may be placed in one cycle or two: 3 GPUs last, then 2.
			if got := steps(before["team-a"]); len(got) < 2 || got[len(got)-2] != 3 || got[len(got)-1] != 2 {
				return fmt.Sprintf("team-a %v", got)
			}
			if got := steps(before["team-b"]); len(got) == 0 || got[len(got)-1] != 2 {
				return fmt.Sprintf("team-b %v", got)
			}
			return ""
		})
	})
	t.Run("after a restart", func(t *testing.T) {
		addrs := make(chan string, 1)
		startDev(t, dir, 2, 2, withMetrics(addrs), hist)
		after := rangeQuery(t, <-addrs, q, start, end, 100*time.Millisecond)
		for _, p := range []string{"team-a", "team-b"} {
			if fmt.Sprint(after[p]) != fmt.Sprint(before[p]) {
				t.Errorf("%s after the restart %v, before %v", p, after[p], before[p])
			}
		}
	})
}
