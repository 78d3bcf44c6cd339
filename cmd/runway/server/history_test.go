package server_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
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

// TestDashboardQueries: every panel of the Helm chart's Grafana dashboard
// is valid PromQL that finds series in runway dev's history after the quick
// start (with $node_pool and $project set to All).
func TestDashboardQueries(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/runway/dashboards/runway.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if len(dash.Panels) < 10 {
		t.Fatalf("%d panels", len(dash.Panels))
	}
	addrs := make(chan string, 1)
	d := startDev(t, t.TempDir(), 2, 2, withMetrics(addrs), func(c *server.DevConfig) {
		c.History = server.HistoryConfig{Interval: 50 * time.Millisecond}
	})
	maddr := <-addrs
	quickStart(t, d)
	time.Sleep(time.Second) // rates need two samples of every counter
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			q := strings.NewReplacer(`"$node_pool"`, `".*"`, `"$project"`, `".*"`).Replace(tg.Expr)
			resp, err := plainHTTP.Get("http://" + maddr + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			var body struct {
				Status, Error string
				Data          struct{ Result []any }
			}
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err != nil || body.Status != "success" {
				t.Errorf("%s: %s: %v %s", p.Title, q, err, body.Error)
			} else if len(body.Data.Result) == 0 {
				t.Errorf("%s: %s finds nothing", p.Title, q)
			}
		}
	}
}
