//go:build linux

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// duration is the length of the load and the kills: CHAOS_DURATION (a Go
// duration), 40 s by default (the short form in `make test`).
func duration(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv("CHAOS_DURATION")
	if v == "" {
		return 40 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("CHAOS_DURATION=%q: want a positive duration such as 5m", v)
	}
	return d
}

var projects = []string{"team-a", "team-b", "team-c"}

func TestChaos(t *testing.T) {
	etcdBin := filepath.Join(repoRoot(t), "bin", "etcd")
	if _, err := os.Stat(etcdBin); err != nil {
		t.Fatalf("the chaos run needs bin/etcd (make test-bins): %v", err)
	}
	runway := buildRunway(t, t.TempDir())
	c := startCluster(t, runway, etcdBin)
	quota := quotav1.NewQuotaServiceClient(c.dial(t, "quota"))
	for _, p := range projects {
		deserved := int64(4000)
		if _, err := quota.CreateProject(t.Context(), &quotav1.CreateProjectRequest{ProjectId: p,
			Project: &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{{NodePool: "nodepools/default",
				Gpu: &quotav1.GpuQuota{DeservedMilliGpus: &deserved}}}}}); err != nil {
			t.Fatalf("CreateProject(%s): %v", p, err)
		}
	}
	// The pods (each its own unprivileged user) append to the ledger.
	ledgerDir := filepath.Join(c.work, "ledger")
	if err := os.Mkdir(ledgerDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ledger := filepath.Join(ledgerDir, "ran")
	// Created here, writable by all: each pod runs as a user of its own.
	if err := os.WriteFile(ledger, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ledger, 0o666); err != nil {
		t.Fatal(err)
	}
	chk := newChecker(c)
	ctx, stopChecker := context.WithCancel(context.Background())
	checked := make(chan struct{})
	go func() { defer close(checked); chk.run(ctx) }()
	defer func() { stopChecker(); <-checked }()

	d := duration(t)
	t.Logf("chaos: %s of load and kills", d)
	loadCtx, stopLoad := context.WithTimeout(context.Background(), d)
	defer stopLoad()
	ld := &load{c: c, client: workloadv1.NewWorkloadServiceClient(c.dial(t, "workload")), ledger: ledger,
		created: map[string]string{}, deleted: map[string]string{}}
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() { ld.caller(loadCtx, i) })
	}
	kills := drive(t, loadCtx, c, chk)
	wg.Wait()

	// Everything runs again; the backlog drains.
	for _, p := range c.etcd {
		if !p.alive() {
			p.start(t)
		}
	}
	for name, p := range c.services {
		if !p.alive() {
			p.start(t)
			c.waitServing(t, name)
		}
	}
	for _, p := range c.agents {
		if !p.alive() {
			p.start(t)
		}
	}
	unfinished := chk.drain(t, 2*time.Minute)
	stopChecker()
	<-checked

	r := chk.final(t, ld, ledger)
	failover, firstBinding := kills.stats()
	t.Logf("kills: %s", kills.summary())
	fmt.Println(kills.failoverParts())
	t.Log(kills.failoverParts())
	t.Logf("time to first binding after a kill: p50 %d ms p99 %d ms (%d kills with work waiting)",
		firstBinding.p(50), firstBinding.p(99), len(firstBinding))
	t.Logf("workloads: %d created, %d deleted, %d completed, %d failed, %d not final after the drain; %d create and %d delete calls failed; %d pods started again after their node died with its agent",
		len(ld.created), len(ld.deleted), r.completed, r.failed, len(unfinished), ld.createErrs, ld.deleteErrs, r.reran)
	for _, f := range r.failures {
		t.Logf("failed: %s", f)
	}
	for _, u := range unfinished {
		t.Logf("not final: %s", u)
		if !strings.Contains(u, " "+workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING.String()+" ") {
			r.problems = append(r.problems, "neither final nor running after the drain: "+u)
		}
	}
	line := fmt.Sprintf("chaos: %d acked, %d lost, %d doubled, %d re-runs after agent death, failover p50 %d ms p99 %d ms",
		len(ld.created)+len(ld.deleted), r.lost, r.doubled, r.reran, failover.p(50), failover.p(99))
	fmt.Println(line)
	t.Log(line)
	for _, p := range r.problems {
		t.Error(p)
	}
	if r.lost != 0 || r.doubled != 0 {
		t.Errorf("%s: want 0 lost and 0 doubled", line)
	}
	if t.Failed() {
		for _, p := range append(append(append([]*proc{}, c.etcd...), c.agents...), servicesOf(c)...) {
			t.Logf("--- %s:\n%s", p.name, p.output())
		}
	}
}

func servicesOf(c *cluster) []*proc {
	var names []string
	for n := range c.services {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*proc
	for _, n := range names {
		out = append(out, c.services[n])
	}
	return out
}

// load is the callers' record of what the API acknowledged.
type load struct {
	c      *cluster
	client workloadv1.WorkloadServiceClient
	ledger string

	mu         sync.Mutex
	created    map[string]string // workload name → uid, acknowledged creates
	deleted    map[string]string // workload name → uid, acknowledged deletes
	createErrs int
	deleteErrs int
}

// caller submits a training about every 600 ms (a pod that writes its
// name to the ledger and sleeps under a second), and now and then deletes
// one of its own.
func (l *load) caller(ctx context.Context, n int) {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	var mine []string
	for seq := 0; ctx.Err() == nil; seq++ {
		if len(mine) > 0 && r.IntN(8) == 0 {
			i := r.IntN(len(mine))
			name := mine[i]
			mine = append(mine[:i], mine[i+1:]...)
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := l.client.DeleteWorkload(cctx, &workloadv1.DeleteWorkloadRequest{Name: name})
			cancel()
			l.mu.Lock()
			if err == nil {
				l.deleted[name] = l.created[name]
			} else {
				l.deleteErrs++
			}
			l.mu.Unlock()
		} else {
			project := projects[r.IntN(len(projects))]
			id := fmt.Sprintf("w-%d-%d", n, seq)
			sleep := fmt.Sprintf("0.%d", 2+r.IntN(7))
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			w, err := l.client.CreateWorkload(cctx, &workloadv1.CreateWorkloadRequest{
				Parent: "projects/" + project, WorkloadId: id, Workload: &workloadv1.Workload{
					Type: workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
					Spec: &workloadv1.WorkloadSpec{Image: "busybox",
						// The ledger line: the pod, where it ran (its
						// directory is under its agent's) and when.
						Command: []string{"sh", "-c", fmt.Sprintf(`echo "%s/%s $(pwd) $(date +%%s%%N)" >> %s; sleep %s`, project, id, l.ledger, sleep)},
						Gpu:     &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_Devices{Devices: 1}}}}})
			cancel()
			l.mu.Lock()
			if err == nil {
				l.created[w.GetName()] = w.GetUid()
				mine = append(mine, w.GetName())
			} else {
				l.createErrs++
			}
			l.mu.Unlock()
		}
		t := time.NewTimer(time.Duration(400+r.IntN(400)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
	}
}

// kill is one SIGKILL of the driver.
type kill struct {
	target       string
	at           time.Time     // when the kill was sent
	dead         time.Time     // when the process (and, for an agent, its pods) had died
	leader       bool          // the scheduler leader was killed
	node         bool          // an agent killed with its pods (its node died), not alone
	failover     time.Duration // until another replica led (leader kills)
	parts        parts         // the failover's parts (failover_test.go)
	firstBinding time.Duration // until the next binding was created (-1: none while work waited)
}

type kills []kill

type millis []int64

// p is the q-th percentile (nearest rank), 0 when empty.
func (m millis) p(q int) int64 {
	if len(m) == 0 {
		return 0
	}
	s := append(millis(nil), m...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (q*len(s) + 99) / 100
	return s[max(i-1, 0)]
}

func (ks kills) stats() (failover, firstBinding millis) {
	for _, k := range ks {
		if k.leader {
			failover = append(failover, k.failover.Milliseconds())
		}
		if k.firstBinding >= 0 {
			firstBinding = append(firstBinding, k.firstBinding.Milliseconds())
		}
	}
	return failover, firstBinding
}

func (ks kills) summary() string {
	count := map[string]int{}
	for _, k := range ks {
		name := k.target
		switch {
		case k.leader:
			name = "scheduler leader"
		case k.node:
			name += " with its pods"
		}
		count[name]++
	}
	var parts []string
	for n, c := range count {
		parts = append(parts, fmt.Sprintf("%s ×%d", n, c))
	}
	sort.Strings(parts)
	return fmt.Sprintf("%d (%s)", len(ks), strings.Join(parts, ", "))
}

// drive kills a random part every 2-4 s until ctx ends, and starts it
// again a moment later; one etcd member at most is ever down.
func drive(t *testing.T, ctx context.Context, c *cluster, chk *checker) kills {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 42))
	var out kills
	var kinds []int
	for {
		wait := time.NewTimer(time.Duration(2000+r.IntN(2000)) * time.Millisecond)
		select {
		case <-ctx.Done():
			wait.Stop()
			return out
		case <-wait.C:
		}
		var p *proc
		k := kill{at: time.Now(), firstBinding: -1}
		// Each round of four kills hits each kind once, in a random order.
		if len(kinds) == 0 {
			kinds = r.Perm(4)
		}
		kind := kinds[0]
		kinds = kinds[1:]
		switch kind {
		case 0: // the scheduler leader
			l := c.leader(ctx)
			if l == "" {
				continue
			}
			p, k.leader = c.services[l], true
		case 1:
			p = c.etcd[r.IntN(len(c.etcd))]
		case 2: // an agent alone (its pods are adopted), or its whole node (they run again)
			p, k.node = c.agents[r.IntN(len(c.agents))], r.IntN(2) == 0
		case 3:
			names := []string{"identity", "quota", "workload", "nodemanager", schedulers[0], schedulers[1]}
			p = c.services[names[r.IntN(len(names))]]
		}
		k.target = p.name
		waiting := chk.pending()
		var fw *failoverWatch
		if k.leader {
			fw = c.watchFailover(p.name, chk.leaderChangedSince)
		}
		k.at = time.Now()
		if k.node {
			p.killNode()
		} else {
			p.kill()
		}
		k.dead = time.Now()
		time.Sleep(time.Duration(300+r.IntN(700)) * time.Millisecond)
		p.start(t)
		if k.leader {
			k.failover, k.parts = fw.wait()
		}
		if strings.HasPrefix(p.name, "etcd") {
			waitFor(t, 60*time.Second, p.name+" back", func() error { return chk.memberHealthy(p) })
		}
		if waiting {
			if at, ok := chk.bindingAfter(k.at, 20*time.Second); ok {
				k.firstBinding = at.Sub(k.at)
			}
		}
		out = append(out, k)
	}
}
