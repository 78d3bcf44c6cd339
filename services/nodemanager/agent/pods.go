package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/runner/local"
	"github.com/runwayhq/runway/services/nodemanager"
)

// reportTimeout bounds one run-report write, which may happen after Run's
// context is done (the STOPPED reports of shutdown).
const reportTimeout = 5 * time.Second

// pod is a bound pod the agent has taken: running, or finished and kept
// so that it is not started again while its binding stays.
type pod struct {
	stop chan struct{} // closed to stop the process
}

// pods reconciles the node's bindings with the processes it runs. Only the
// run goroutine touches the maps.
type pods struct {
	cfg    Config
	runner *local.Runner
	gpus   *gpuManager
	log    *slog.Logger

	taken   map[string]*pod // by binding key
	running *runningPods
	wg      sync.WaitGroup
}

func (p *pods) run(ctx context.Context) error {
	p.taken = map[string]*pod{}
	defer p.stopAll()
	backoff := 50 * time.Millisecond
	for {
		rev, err := p.resync(ctx)
		if err == nil {
			err = p.watch(ctx, rev+1)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.log.Warn("bindings watch interrupted; listing again", "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// resync lists the node's bindings and applies the whole set: pods of
// bindings gone while the watch was down are stopped.
func (p *pods) resync(ctx context.Context) (int64, error) {
	resp, err := p.cfg.Client.Get(ctx, nodemanager.BindingsPrefix(p.cfg.Node), clientv3.WithPrefix())
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, kv := range resp.Kvs {
		seen[string(kv.Key)] = true
		if err := p.put(ctx, string(kv.Key), kv.Value, kv.CreateRevision); err != nil {
			return 0, err
		}
	}
	for key := range p.taken {
		if !seen[key] {
			p.apply(ctx, key, nil)
		}
	}
	return resp.Header.Revision, nil
}

// watch applies binding changes from revision rev until the watch fails.
func (p *pods) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range p.cfg.Client.Watch(wctx, nodemanager.BindingsPrefix(p.cfg.Node), clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := resp.Err(); err != nil {
			return err
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				p.apply(ctx, string(ev.Kv.Key), nil)
			} else if err := p.put(ctx, string(ev.Kv.Key), ev.Kv.Value, ev.Kv.CreateRevision); err != nil {
				return err
			}
		}
	}
	return errors.New("watch channel closed")
}

// put takes a binding (created at createRev). A pod that ended is not
// started again for the same binding: when its run report is newer than
// the binding and final, an earlier run of this agent (before a crash or
// a restart) ran it to the end. A pod whose report says it was still
// running lost its process with that agent, and is started again. An
// error (the report could not be read) makes the caller list again.
func (p *pods) put(ctx context.Context, key string, value []byte, createRev int64) error {
	b, err := nodemanager.DecodeBinding(key, value)
	if err != nil {
		p.log.Error("ignoring binding", "key", key, "err", err)
		return nil
	}
	if _, taken := p.taken[key]; taken {
		return nil
	}
	resp, err := p.cfg.Client.Get(ctx, nodemanager.RunKey(p.cfg.Node, b.Project, b.Workload, b.Pod))
	if err != nil {
		return fmt.Errorf("read the run report of %s: %w", key, err)
	}
	if len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision > createRev {
		prev := new(nodemanagerv1.ReportWorkloadStateRequest)
		if err := proto.Unmarshal(resp.Kvs[0].Value, prev); err == nil && ended(prev.GetState()) {
			p.taken[key] = &pod{stop: make(chan struct{})} // kept, so that it is not started again
			return nil
		}
		p.log.Info("starting again a pod whose process was lost with an earlier run of the agent", "binding", key)
	}
	p.apply(ctx, key, &b)
	return nil
}

// ended: a final state of a run report.
func ended(s workloadv1.PodState) bool {
	return s == workloadv1.PodState_POD_STATE_SUCCEEDED || s == workloadv1.PodState_POD_STATE_FAILED ||
		s == workloadv1.PodState_POD_STATE_STOPPED
}

// apply starts the pod of a new binding, or stops the pod of a deleted
// one (b nil). A binding put again for a pod already taken (the same
// placement rewritten) changes nothing.
func (p *pods) apply(ctx context.Context, key string, b *nodemanager.Binding) {
	pd, taken := p.taken[key]
	switch {
	case b == nil && taken:
		close(pd.stop)
		delete(p.taken, key)
	case b != nil && !taken:
		pd := &pod{stop: make(chan struct{})}
		p.taken[key] = pd
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.runPod(ctx, *b, pd)
		}()
	}
}

func (p *pods) stopAll() {
	for k, pd := range p.taken {
		close(pd.stop)
		delete(p.taken, k)
	}
	p.wg.Wait()
}

// runPod starts one pod, reports RUNNING, and reports how it ended.
func (p *pods) runPod(ctx context.Context, b nodemanager.Binding, pd *pod) {
	run := &podRun{p: p, ctx: ctx, workload: b.WorkloadName(), index: b.Pod, oom: make(chan string, 1)}
	spec, err := p.spec(ctx, b)
	if err != nil {
		run.report(workloadv1.PodState_POD_STATE_FAILED, 0, err.Error())
		return
	}
	proc, err := p.runner.Start(spec)
	if err != nil {
		run.report(workloadv1.PodState_POD_STATE_FAILED, 0, err.Error())
		return
	}
	p.running.set(spec.ID, true)
	run.report(workloadv1.PodState_POD_STATE_RUNNING, 0, "")
	if len(b.Devices) > 0 {
		p.gpus.add(&gpuPod{id: spec.ID, b: b, pgid: proc.Pid(), dir: proc.Dir(), limit: spec.GPUMemoryBytes, run: run})
		defer p.gpus.remove(spec.ID)
	}
	oom := ""
	select {
	case <-proc.Done():
	case <-pd.stop:
		proc.Stop(context.WithoutCancel(ctx))
	case oom = <-run.oom:
		proc.Kill()
	}
	ex := proc.Exit()
	p.running.set(spec.ID, false)
	switch {
	case oom != "":
		run.report(workloadv1.PodState_POD_STATE_FAILED, ex.Code, oom)
	case ex.Stopped:
		run.report(workloadv1.PodState_POD_STATE_STOPPED, ex.Code, "Stopped by the node agent.")
	case ex.Code == 0:
		run.report(workloadv1.PodState_POD_STATE_SUCCEEDED, 0, "")
	default:
		run.report(workloadv1.PodState_POD_STATE_FAILED, ex.Code, lastLine(proc.LogPath()))
	}
}

// podRun is how a started pod is reported: its reports are serialised,
// carry its latest GPU idle time, and stop after the final one, so that a
// late idle-time report never hides how the pod ended.
type podRun struct {
	p        *pods
	ctx      context.Context
	workload string
	index    int
	oom      chan string // the out-of-memory reason, once

	mu    sync.Mutex
	ended bool
	state workloadv1.PodState
	idle  time.Duration
}

func (r *podRun) report(state workloadv1.PodState, code int, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = state
	r.ended = state != workloadv1.PodState_POD_STATE_RUNNING
	r.p.report(r.ctx, r.workload, r.index, state, code, msg, r.idle)
}

// idleChanged reports the pod RUNNING again with its new idle time.
func (r *podRun) idleChanged(idle time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idle = idle
	if !r.ended {
		r.p.report(r.ctx, r.workload, r.index, r.state, 0, "", idle)
	}
}

// outOfMemory asks runPod to end the pod for reason; the first reason
// wins.
func (r *podRun) outOfMemory(reason string) {
	select {
	case r.oom <- reason:
	default:
	}
}

// spec builds the runner's spec from the binding and the workload's
// command, read from the workload service's key (read only).
func (p *pods) spec(ctx context.Context, b nodemanager.Binding) (local.Spec, error) {
	c := etcdstore.NewCollection(p.cfg.Client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	it, err := c.Get(ctx, b.Project+"/"+b.Workload)
	if err != nil {
		return local.Spec{}, fmt.Errorf("read workload: %w", err)
	}
	ws := it.Msg.GetSpec()
	cmd := append(append([]string(nil), ws.GetCommand()...), ws.GetArgs()...)
	if len(cmd) == 0 {
		return local.Spec{}, errors.New("the workload has no command; the local runner runs commands, not images")
	}
	var env []string
	for _, e := range ws.GetEnv() {
		env = append(env, e.GetName()+"="+e.GetValue())
	}
	id := podID(b.Project, b.Workload, b.Pod)
	limit := p.gpus.memoryLimit(b, ws.GetGpu().GetGpuMemoryBytes())
	if len(b.Devices) > 0 {
		env = append(env, p.cfg.Backend.PodEnv(filepath.Join(p.cfg.DataDir, id))...)
		env = append(env, mpsEnv(p.cfg.MPSPipeDir, b, limit)...)
	}
	return local.Spec{
		ID:       id,
		Command:  cmd,
		Env:      env,
		Workload: b.WorkloadName(), Project: b.Project, Pod: b.Pod,
		Devices: b.Devices, FractionMilli: b.FractionMilli, GPUMemoryBytes: limit,
	}, nil
}

// mpsEnv is the environment of a pod under an MPS control daemon (pipe
// directory dir; none when dir is empty): the daemon, not the agent, then
// holds the pod to its memory limit and its fraction of the SMs.
func mpsEnv(dir string, b nodemanager.Binding, limit int64) []string {
	if dir == "" {
		return nil
	}
	env := []string{"CUDA_MPS_PIPE_DIRECTORY=" + dir,
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=" + strconv.FormatInt(max(b.FractionMilli/10, 1), 10)}
	if limit > 0 {
		// Devices are numbered as the pod sees them (CUDA_VISIBLE_DEVICES).
		var lim []string
		for i := range b.Devices {
			lim = append(lim, fmt.Sprintf("%d=%dM", i, limit>>20))
		}
		env = append(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="+strings.Join(lim, ","))
	}
	return env
}

func (p *pods) report(ctx context.Context, workload string, index int, state workloadv1.PodState, code int, msg string, idle time.Duration) {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	r := &nodemanagerv1.ReportWorkloadStateRequest{
		Node: nodemanager.NodeName(p.cfg.Node), Workload: workload, PodIndex: int32(index),
		State: state, ExitCode: int32(code), Message: msg, ObserveTime: timestamppb.Now(),
		GpuIdleTime: durationpb.New(idle),
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
	defer cancel()
	if err := nodemanager.PutRun(rctx, p.cfg.Client, r); err != nil {
		p.log.Error("run report not stored", "workload", workload, "pod", index, "state", state, "err", err)
	}
}

// lastLine is the last non-empty line of the pod's log, for the FAILED
// report's message.
func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 4096
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-tail, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	return lines[len(lines)-1]
}
