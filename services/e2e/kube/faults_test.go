package kube_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/services/nodemanager/kube/kwoktest"
)

// TestNodesJoinAtOnce: 500 KWOK nodes of 8 GPUs join at once; every one
// becomes a Ready, undrained Runway node with its 8 devices: schedulable.
// The time it took is logged (a measure, not asserted).
func TestNodesJoinAtOnce(t *testing.T) {
	const n = 500
	e := newEnv(t, "join")
	e.start(t)
	start := time.Now()
	if err := cluster.CreateNodes(t.Context(), kwoktest.GPUNodes("join", n, 8)...); err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	var last string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ready := 0
		for node, err := range e.rw.Nodes(t.Context(), "") {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(node.GetName(), "nodes/join-") && node.GetReadiness() == nodemanagerv1.Readiness_READINESS_READY &&
				!node.GetDrained() && len(node.GetDevices()) == 8 {
				ready++
			}
		}
		if ready == n {
			break
		}
		last = fmt.Sprintf("%d of %d schedulable", ready, n)
		if time.Now().After(deadline) {
			t.Fatalf("nodes joined at once: after 2 min %s", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d nodes joined: created in %v, all schedulable in Runway %v after the first create",
		n, created.Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond))
}
