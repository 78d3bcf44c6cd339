package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCLI_Notifications: `runway notification subscribe --webhook URL
// --event failed -p team-a` on runway dev (loopback allowed there); a
// training that fails reaches the webhook (a receiver on 127.0.0.1 that
// answers 500 once), `runway notification deliveries` shows it sent after
// two attempts with the first failure, list shows the subscription, delete
// removes it.
func TestCLI_Notifications(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	calls := 0
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		bodies = append(bodies, string(b))
	}))
	defer hook.Close()
	d := startDev(t)
	d.ok(t, "project", "create", "team-a", "--gpu", "1")

	if r := d.run(t, "notification", "subscribe", "--event", "failed,nope", "--webhook", hook.URL); r.code != 2 || !strings.Contains(r.stderr, "nope") {
		t.Errorf("an unknown event: exit %d %s", r.code, r.stderr)
	}
	out := d.ok(t, "notification", "subscribe", "ops", "--webhook", hook.URL+"/runway", "--event", "failed,preempted", "-p", "team-a")
	wantAll(t, "subscribe", out, `subscription "users/admin/subscriptions/ops" created`)
	out = d.ok(t, "notification", "list")
	wantAll(t, "list", out, "ops", "failed,preempted", "team-a", "webhook "+hook.URL+"/runway")

	d.ok(t, "training", "submit", "crash", "-p", "team-a", "-i", "busybox", "--", "sh", "-c", "exit 3")
	deadline := time.Now().Add(60 * time.Second)
	for {
		out = d.ok(t, "notification", "deliveries", "ops")
		if strings.Contains(out, "sent") || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	wantAll(t, "deliveries", out, "failed", "projects/team-a/workloads/crash", "sent", " 2 ", "500 Internal Server Error")
	mu.Lock()
	if len(bodies) != 1 {
		t.Fatalf("webhook bodies %q", bodies)
	}
	var n map[string]any
	if err := json.Unmarshal([]byte(bodies[0]), &n); err != nil || n["event"] != "NOTIFICATION_EVENT_WORKLOAD_FAILED" ||
		n["resource"] != "projects/team-a/workloads/crash" || n["subscription"] != "users/admin/subscriptions/ops" {
		t.Errorf("webhook body %s: %v", bodies[0], err)
	}
	mu.Unlock()
	out = d.ok(t, "notification", "deliveries", "ops", "-o", "json")
	wantAll(t, "deliveries json", out, `"state": "DELIVERY_STATE_SENT"`, `"attempts": 2`)

	wantAll(t, "delete", d.ok(t, "notification", "delete", "ops"), `subscription "users/admin/subscriptions/ops" deleted`)
	if out := d.ok(t, "notification", "list"); strings.Contains(out, "ops") {
		t.Errorf("list after delete:\n%s", out)
	}
	if r := d.run(t, "notification", "deliveries", "ops"); r.code == 0 {
		t.Errorf("deliveries of a deleted subscription: %s", r.stdout)
	}
}
