//go:build linux

package chaos

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A failover is measured from the leader's kill: until another replica
// holds the election (the run's failover), and in parts: until the killed
// leader's key was deleted (seen by a watch of this run), then, from the
// new leader's runway_scheduler_failover_phase_seconds, until it led
// (elect), until it was ready to plan (ready) and until its first plan was
// written (first_cycle). lease is the new leader's own view: from seeing
// the old leader's process gone until its key was deleted.
var failoverPhases = []string{"lease", "elect", "ready", "first_cycle"}

// parts is one failover's parts (ok: the new leader's phases were read).
type parts struct {
	ok    bool
	gone  time.Duration            // kill → the old leader's key deleted
	phase map[string]time.Duration // the new leader's phases; lease only when it saw the process go
}

// failoverWatch follows one leader kill from just before it.
type failoverWatch struct {
	c        *cluster
	old      string // the killed leader
	standby  string // the replica expected to take over
	at       time.Time
	before   phaseSums
	leadDone chan time.Duration // kill → another replica leads (0: not within the wait)
	goneDone chan time.Duration // kill → the old key deleted (0: not seen)
}

// watchFailover starts following the kill of leader old, sent at about at;
// call it just before the kill. leaderChanged reports a new leadership
// since a time (the checker's view).
func (c *cluster) watchFailover(old string, leaderChanged func(time.Time) bool) *failoverWatch {
	fw := &failoverWatch{c: c, old: old, leadDone: make(chan time.Duration, 1), goneDone: make(chan time.Duration, 1)}
	for _, r := range schedulers {
		if r != old {
			fw.standby = r
		}
	}
	fw.before, _ = c.phaseSums(fw.standby)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	resp, err := c.client.Get(ctx, "/runway/v1/election/scheduler/", clientv3.WithFirstCreate()...)
	fw.at = time.Now()
	if err != nil || len(resp.Kvs) == 0 {
		cancel()
		fw.goneDone <- 0
	} else {
		key := string(resp.Kvs[0].Key)
		events := c.client.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1))
		go func() {
			defer cancel()
			for wr := range events {
				for _, ev := range wr.Events {
					if ev.Type == clientv3.EventTypeDelete {
						fw.goneDone <- time.Since(fw.at)
						return
					}
				}
			}
			fw.goneDone <- 0
		}()
	}
	// Polled from the kill on, so that the replica's restart does not
	// bound the measure from below.
	go func() {
		deadline := fw.at.Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if l := c.leader(context.Background()); l != "" && (l != old || leaderChanged(fw.at)) {
				fw.leadDone <- time.Since(fw.at)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		fw.leadDone <- 0
	}()
	return fw
}

// wait returns the failover and its parts; the parts wait (up to 10 s) for
// the new leader's first plan.
func (fw *failoverWatch) wait() (time.Duration, parts) {
	failover, gone := <-fw.leadDone, <-fw.goneDone
	p := parts{gone: gone}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		after, err := fw.c.phaseSums(fw.standby)
		if err == nil && after["first_cycle"].count > fw.before["first_cycle"].count {
			p.ok, p.phase = gone > 0, map[string]time.Duration{}
			for _, ph := range failoverPhases {
				if after[ph].count == fw.before[ph].count+1 {
					p.phase[ph] = time.Duration((after[ph].sum - fw.before[ph].sum) * float64(time.Second))
				}
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return failover, p
}

// phaseSums is one replica's runway_scheduler_failover_phase_seconds, by
// phase.
type phaseSums map[string]struct {
	sum   float64
	count uint64
}

func (c *cluster) phaseSums(replica string) (phaseSums, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.metrics[replica]+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics of %s: %s", replica, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", replica, err)
	}
	out := phaseSums{}
	for _, m := range fams["runway_scheduler_failover_phase_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "phase" {
				h := m.GetHistogram()
				out[l.GetValue()] = struct {
					sum   float64
					count uint64
				}{h.GetSampleSum(), h.GetSampleCount()}
			}
		}
	}
	return out, nil
}

// failoverParts is the run's line of failover parts: p50 and p99 of each,
// and of their total (kill → the new leader's first plan).
func (ks kills) failoverParts() string {
	by := map[string]millis{}
	n := 0
	for _, k := range ks {
		if !k.leader || !k.parts.ok {
			continue
		}
		n++
		by["gone"] = append(by["gone"], k.parts.gone.Milliseconds())
		total := k.parts.gone
		for ph, d := range k.parts.phase {
			by[ph] = append(by[ph], d.Milliseconds())
			if ph != "lease" {
				total += d
			}
		}
		by["total"] = append(by["total"], total.Milliseconds())
	}
	parts := []string{fmt.Sprintf("kill→key gone p50 %d p99 %d", by["gone"].p(50), by["gone"].p(99))}
	for _, ph := range failoverPhases {
		parts = append(parts, fmt.Sprintf("%s p50 %d p99 %d (%d)", ph, by[ph].p(50), by[ph].p(99), len(by[ph])))
	}
	parts = append(parts, fmt.Sprintf("kill→first plan p50 %d p99 %d", by["total"].p(50), by["total"].p(99)))
	return fmt.Sprintf("failover parts, ms, of %d failovers: %s", n, strings.Join(parts, "; "))
}
