//go:build linux

package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/services/workload"
)

const (
	prefixBindings  = "/runway/v1/bindings/"
	prefixWorkloads = "/runway/v1/workloads/"
	prefixRuns      = "/runway/v1/runs/"
)

// checker reads etcd directly, never through the services: a watch of
// every binding ever created, a sample of the bindings every 200 ms, and
// the scheduler election.
type checker struct {
	c *cluster

	mu        sync.Mutex
	creations map[string]int // binding creations by workload ("project/workload")
	// restartEvents: the most "restarted after its node agent failed"
	// events each workload had; reportedRestarts: the most agent restarts
	// each pod's run reports said ("project/workload.pod").
	restartEvents, reportedRestarts map[string]int
	lastCreated                     []time.Time // when bindings were created, in order
	samples                         int
	doubles                         []string // a pod bound twice, or a device over capacity, at a sample
	leaderRev                       int64    // CreateRevision of the leader's key
	leaderSince                     time.Time
}

func newChecker(c *cluster) *checker {
	return &checker{c: c, creations: map[string]int{}, restartEvents: map[string]int{}, reportedRestarts: map[string]int{}}
}

func (k *checker) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { k.watch(ctx, prefixBindings, k.bindingPut) })
	wg.Go(func() { k.watch(ctx, prefixWorkloads, k.workloadPut) })
	wg.Go(func() { k.watch(ctx, prefixRuns, k.runPut) })
	wg.Go(func() { every(ctx, 200*time.Millisecond, k.sample) })
	wg.Go(func() { every(ctx, 20*time.Millisecond, k.pollLeader) })
	wg.Wait()
}

// every runs f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func(context.Context)) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f(ctx)
		}
	}
}

// watch calls f with every event under prefix from the first revision,
// resuming after any interruption.
func (k *checker) watch(ctx context.Context, prefix string, f func(*clientv3.Event)) {
	next := int64(1)
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for resp := range k.c.client.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(next)) {
			if resp.Err() != nil {
				break
			}
			for _, ev := range resp.Events {
				next = ev.Kv.ModRevision + 1
				f(ev)
			}
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
}

// bindingPut counts a binding's creation for its workload.
func (k *checker) bindingPut(ev *clientv3.Event) {
	if ev.Type != clientv3.EventTypePut || ev.Kv.CreateRevision != ev.Kv.ModRevision {
		return
	}
	w, _, ok := parseBinding(string(ev.Kv.Key))
	if !ok {
		return
	}
	k.mu.Lock()
	k.creations[w]++
	k.lastCreated = append(k.lastCreated, time.Now())
	k.mu.Unlock()
}

// workloadPut keeps the most restart events a workload ever had: a
// workload deleted at the end has none left to read.
func (k *checker) workloadPut(ev *clientv3.Event) {
	w := &workloadv1.Workload{}
	if ev.Type != clientv3.EventTypePut || proto.Unmarshal(ev.Kv.Value, w) != nil {
		return
	}
	key := workloadKey(w.GetName())
	k.mu.Lock()
	k.restartEvents[key] = max(k.restartEvents[key], restartsOf(w))
	k.mu.Unlock()
}

// runPut keeps the most agent restarts a workload's run reports ever
// said, by pod: for a workload deleted before its controller folded the
// restart into an event.
func (k *checker) runPut(ev *clientv3.Event) {
	r := &nodemanagerv1.ReportWorkloadStateRequest{}
	if ev.Type != clientv3.EventTypePut || proto.Unmarshal(ev.Kv.Value, r) != nil {
		return
	}
	pod := fmt.Sprintf("%s.%d", workloadKey(r.GetWorkload()), r.GetPodIndex())
	k.mu.Lock()
	k.reportedRestarts[pod] = max(k.reportedRestarts[pod], int(r.GetAgentRestarts()))
	k.mu.Unlock()
}

// parseBinding: bindings/{node}/{project}.{workload}.{pod} → "project/workload", node.
func parseBinding(key string) (workload, node string, ok bool) {
	node, rest, ok := strings.Cut(strings.TrimPrefix(key, prefixBindings), "/")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 3 {
		return "", "", false
	}
	return parts[0] + "/" + parts[1], node, true
}

// sample checks one snapshot of the bindings: every pod bound at most
// once, every device at most full.
func (k *checker) sample(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := k.c.client.Get(cctx, prefixBindings, clientv3.WithPrefix())
	if err != nil {
		return
	}
	pods := map[string][]string{}
	devices := map[string]int32{}
	for _, kv := range resp.Kvs {
		w, node, ok := parseBinding(string(kv.Key))
		if !ok {
			continue
		}
		ps := &workloadv1.PodStatus{}
		if proto.Unmarshal(kv.Value, ps) != nil {
			continue
		}
		pk := fmt.Sprintf("%s pod %d", w, ps.GetIndex())
		pods[pk] = append(pods[pk], node)
		for _, d := range ps.GetDeviceIndexes() {
			devices[fmt.Sprintf("%s GPU %d", node, d)] += ps.GetFractionMilli()
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.samples++
	for pk, nodes := range pods {
		if len(nodes) > 1 {
			k.doubles = append(k.doubles, fmt.Sprintf("revision %d: %s bound on %v", resp.Header.Revision, pk, nodes))
		}
	}
	for dev, milli := range devices {
		if milli > 1000 {
			k.doubles = append(k.doubles, fmt.Sprintf("revision %d: %s holds %d milli-GPUs", resp.Header.Revision, dev, milli))
		}
	}
}

func (k *checker) pollLeader(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := k.c.client.Get(cctx, "/runway/v1/election/scheduler/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if rev := resp.Kvs[0].CreateRevision; rev != k.leaderRev {
		k.leaderRev, k.leaderSince = rev, time.Now()
	}
}

// leaderChangedSince: a new leadership (a new election key) began after t.
func (k *checker) leaderChangedSince(t time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.leaderSince.After(t)
}

// bindingAfter waits up to timeout for a binding created after t.
func (k *checker) bindingAfter(t time.Time, timeout time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		k.mu.Lock()
		for i := len(k.lastCreated) - 1; i >= 0 && k.lastCreated[i].After(t); i-- {
			if i == 0 || !k.lastCreated[i-1].After(t) {
				at := k.lastCreated[i]
				k.mu.Unlock()
				return at, true
			}
		}
		k.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, false
}

// workloads reads every stored workload.
func (k *checker) workloads(ctx context.Context) (map[string]*workloadv1.Workload, error) {
	resp, err := k.c.client.Get(ctx, prefixWorkloads, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := map[string]*workloadv1.Workload{}
	for _, kv := range resp.Kvs {
		w := &workloadv1.Workload{}
		if err := proto.Unmarshal(kv.Value, w); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kv.Key, err)
		}
		out[w.GetName()] = w
	}
	return out, nil
}

// pending reports whether a workload waits for a placement now.
func (k *checker) pending() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ws, err := k.workloads(ctx)
	if err != nil {
		return false
	}
	for _, w := range ws {
		if w.GetStatus().GetPhase() == workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING {
			return true
		}
	}
	return false
}

// memberHealthy reads from the one etcd member p.
func (k *checker) memberHealthy(p *proc) error {
	var endpoint string
	for i, e := range k.c.etcd {
		if e == p {
			endpoint = k.c.endpoints[i]
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = cli.Get(ctx, "health")
	return err
}

// drain waits until every stored workload is final (or timeout) and
// returns those that are not, each with its phase and last event.
func (k *checker) drain(t *testing.T, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ws, err := k.workloads(ctx)
		cancel()
		var left []string
		for name, w := range ws {
			st := w.GetStatus()
			if p := st.GetPhase(); p != workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED && p != workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED {
				last := ""
				if evs := st.GetEvents(); len(evs) > 0 {
					last = evs[len(evs)-1].GetType().String() + ": " + evs[len(evs)-1].GetMessage()
				}
				left = append(left, fmt.Sprintf("%s %s (%d pods bound; last event %s)", name, p, len(st.GetPods()), last))
			}
		}
		if err == nil && len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// result is the end-of-run verdict.
type result struct {
	lost, doubled     int
	completed, failed int
	failures          []string // each failed workload's last event, for the log
	reran             int      // pods started again after their node died with its agent (said by their events)
	problems          []string
}

// final checks the acknowledged writes, the samples, the ledger of runs
// and each workload's phase against its history.
func (k *checker) final(t *testing.T, ld *load, ledger string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, err := k.workloads(ctx)
	if err != nil {
		t.Fatalf("read the workloads: %v", err)
	}
	var r result
	ld.mu.Lock()
	defer ld.mu.Unlock()
	for name, uid := range ld.created {
		if _, gone := ld.deleted[name]; gone {
			continue
		}
		if w, ok := ws[name]; !ok || w.GetUid() != uid {
			r.lost++
			r.problems = append(r.problems, fmt.Sprintf("acknowledged create of %s (uid %s) is not stored", name, uid))
		}
	}
	for name := range ld.deleted {
		if _, ok := ws[name]; ok {
			r.lost++
			r.problems = append(r.problems, fmt.Sprintf("acknowledged delete of %s: still stored", name))
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	r.doubled += len(k.doubles)
	for _, d := range k.doubles {
		r.problems = append(r.problems, "sampled: "+d)
	}
	if k.samples == 0 {
		r.problems = append(r.problems, "the checker took no sample")
	}
	b, err := os.ReadFile(ledger)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	// A run beyond the workload's bindings is doubled unless an event says
	// its agent ran it again after the pod died with its node; a workload
	// deleted by the end is held to the most such events it ever had, or,
	// where its controller never folded them (deleted first), to what its
	// pods' run reports said.
	ran := runsOf(string(b))
	byKey := map[string]*workloadv1.Workload{}
	for name, w := range ws {
		byKey[workloadKey(name)] = w
	}
	for w, n := range ran {
		reran := restartsOf(byKey[w])
		if byKey[w] == nil {
			reran = max(k.restartEvents[w], k.reportedRestartsOf(w))
		}
		r.reran += reran
		if n-reran > k.creations[w] {
			r.doubled += n - reran - k.creations[w]
			var evs []string
			for _, ev := range byKey[w].GetStatus().GetEvents() {
				evs = append(evs, ev.GetType().String()+" "+ev.GetMessage())
			}
			r.problems = append(r.problems, fmt.Sprintf("%s ran %d times with %d bindings and %d restarts after its agent failed (stored: %t); ledger %q; events %q",
				w, n, k.creations[w], reran, byKey[w] != nil, ledgerOf(string(b), w), evs))
		}
	}
	for name, w := range ws {
		id := workloadKey(name)
		switch w.GetStatus().GetPhase() {
		case workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED:
			r.completed++
			if ran[id] == 0 {
				r.problems = append(r.problems, fmt.Sprintf("%s is COMPLETED but its pod never ran", name))
			}
		case workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED:
			r.failed++
			if evs := w.GetStatus().GetEvents(); len(evs) > 0 {
				r.failures = append(r.failures, name+": "+evs[len(evs)-1].GetMessage())
			}
		}
		if why := historyDisagrees(w); why != "" {
			r.problems = append(r.problems, fmt.Sprintf("%s: %s", name, why))
		}
	}
	return r
}

// reportedRestartsOf is the agent restarts the run reports of workload w
// said, over its pods.
func (k *checker) reportedRestartsOf(w string) int {
	n := 0
	for pod, r := range k.reportedRestarts {
		if strings.HasPrefix(pod, w+".") {
			n += r
		}
	}
	return n
}

// runsOf reads the ledger: how many times each pod ran.
func runsOf(ledger string) map[string]int {
	ran := map[string]int{}
	for line := range strings.Lines(ledger) {
		if f := strings.Fields(line); len(f) == 3 {
			ran[f[0]]++
		}
	}
	return ran
}

// ledgerOf is the ledger's lines of workload w.
func ledgerOf(ledger, w string) []string {
	var out []string
	for line := range strings.Lines(ledger) {
		if strings.HasPrefix(line, w+" ") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// workloadKey is "project/workload" of projects/{project}/workloads/{workload}.
func workloadKey(name string) string {
	return strings.TrimPrefix(strings.Replace(name, "/workloads/", "/", 1), "projects/")
}

// restartsOf counts the workload's events saying a pod of it was run
// again after its agent failed (the pod died with its node).
func restartsOf(w *workloadv1.Workload) int {
	n := 0
	for _, ev := range w.GetStatus().GetEvents() {
		if ev.GetType() == workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_STARTED &&
			strings.Contains(ev.GetMessage(), workload.RestartedAfterAgentFailure) {
			n++
		}
	}
	return n
}

// historyDisagrees says how a workload's phase contradicts its events
// ("" when it does not): final exactly when it has a FINISHED event, which
// says whether every pod exited 0; otherwise RUNNING exactly when its last
// placement event is a SCHEDULED one.
func historyDisagrees(w *workloadv1.Workload) string {
	st := w.GetStatus()
	var finished *workloadv1.WorkloadEvent
	var lastPlacement workloadv1.WorkloadEventType
	for _, ev := range st.GetEvents() {
		switch ev.GetType() {
		case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_FINISHED:
			finished = ev
		case workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SCHEDULED, workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_PREEMPTED:
			if finished != nil {
				return "placement events after FINISHED"
			}
			lastPlacement = ev.GetType()
		}
	}
	phase := st.GetPhase()
	switch {
	case finished != nil && finished.GetMessage() == "Every pod exited 0." && phase != workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED:
		return fmt.Sprintf("FINISHED (every pod exited 0) but %s", phase)
	case finished != nil && finished.GetMessage() != "Every pod exited 0." && phase != workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED:
		return fmt.Sprintf("FINISHED (%s) but %s", finished.GetMessage(), phase)
	case finished == nil && (phase == workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED || phase == workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED):
		return fmt.Sprintf("%s without a FINISHED event", phase)
	case finished == nil && phase == workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING && lastPlacement != workloadv1.WorkloadEventType_WORKLOAD_EVENT_TYPE_SCHEDULED:
		return "RUNNING but its last placement event is not SCHEDULED"
	}
	return ""
}
