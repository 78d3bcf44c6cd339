package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/services/nodemanager"
)

// reportTimeout bounds the last try to store the reports once Run's
// context is done (the STOPPED reports of shutdown).
const reportTimeout = 5 * time.Second

// pod is a bound pod the agent has taken: running, or finished and kept
// so that it is not started again while its binding stays.
type pod struct {
	rev  int64         // the binding's ModRevision: which placement it is
	stop chan struct{} // closed to stop the process
	done chan struct{} // closed once its process has exited
	// replaced: a new placement of the same pod took over (a move on this
	// node), so the stopped one reports nothing; set before stop closes.
	replaced bool
}

// finalName is the file in a pod's record directory holding its final run
// report: a restarted agent reads it instead of running the pod again.
const finalName = "final"

// pods reconciles the node's bindings with the processes it runs. Only the
// run goroutine touches the maps.
type pods struct {
	cfg    Config
	runner runner.Runner
	gpus   *gpuManager
	log    *slog.Logger

	taken map[string]*pod // by binding key
	// ending are the pods of deleted bindings until they have exited, by
	// binding key: the same pod bound here again starts after its end.
	ending   map[string]chan struct{}
	running  *runningPods
	reporter *reporter
	wg       sync.WaitGroup
	reaped   bool // the runner's pods of bindings gone while no agent ran are removed
}

func (p *pods) run(ctx context.Context) error {
	p.taken, p.ending = map[string]*pod{}, map[string]chan struct{}{}
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
		p.put(ctx, string(kv.Key), kv.Value, kv.ModRevision)
	}
	for key := range p.taken {
		if !seen[key] {
			p.apply(ctx, key, nil)
		}
	}
	if r, ok := p.runner.(runner.Reaper); ok && !p.reaped {
		r.Reap(func(project, workload string, pod int) bool {
			return seen[nodemanager.BindingKey(p.cfg.Node, project, workload, pod)]
		})
		p.reaped = true
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
			} else {
				p.put(ctx, string(ev.Kv.Key), ev.Kv.Value, ev.Kv.ModRevision)
			}
		}
	}
	return errors.New("watch channel closed")
}

func (p *pods) put(ctx context.Context, key string, value []byte, rev int64) {
	b, err := nodemanager.DecodeBinding(key, value)
	if err != nil {
		p.log.Error("ignoring binding", "key", key, "err", err)
		return
	}
	p.applyRev(ctx, key, &b, rev)
}

// apply stops the pod of a deleted binding (b nil).
func (p *pods) apply(ctx context.Context, key string, b *nodemanager.Binding) {
	p.applyRev(ctx, key, b, 0)
}

// applyRev starts the pod of a new binding (written at revision rev), or
// stops the pod of a deleted one (b nil). The same placement seen again
// changes nothing; a binding written anew (deleted and bound again, or
// moved to other devices of this node by consolidation, which rewrites
// it) is a new placement: the old pod is stopped without a report of its
// own. The new one starts once the old has exited (they share a pod id:
// its directories, uid and cgroup), whether its binding was rewritten or
// deleted first.
func (p *pods) applyRev(ctx context.Context, key string, b *nodemanager.Binding, rev int64) {
	pd, taken := p.taken[key]
	prev := p.ending[key]
	if taken && b != nil && rev != 0 && pd.rev != rev {
		pd.replaced = true
		close(pd.stop)
		delete(p.taken, key)
		taken, prev = false, pd.done
	}
	switch {
	case b == nil && taken:
		close(pd.stop)
		delete(p.taken, key)
		for k, done := range p.ending { // those ended since
			select {
			case <-done:
				delete(p.ending, k)
			default:
			}
		}
		p.ending[key] = pd.done
	case b != nil && !taken:
		delete(p.ending, key)
		pd := &pod{rev: rev, stop: make(chan struct{}), done: make(chan struct{})}
		p.taken[key] = pd
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer close(pd.done)
			if prev != nil {
				select {
				case <-prev:
				case <-pd.stop:
					return
				}
			}
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

// runPod starts one pod, reports RUNNING, and reports how it ended; the
// final report is kept in the pod's record directory first, so that a
// restarted agent re-sends it rather than run the pod again.
func (p *pods) runPod(ctx context.Context, b nodemanager.Binding, pd *pod) {
	run := &podRun{p: p, ctx: ctx, workload: b.WorkloadName(), index: b.Pod, oom: make(chan string, 1)}
	spec, data, err := p.spec(ctx, b)
	if err != nil {
		run.report(workloadv1.PodState_POD_STATE_FAILED, 0, err.Error())
		return
	}
	rec := p.runner.RecordDir(spec.ID)
	run.final = filepath.Join(rec, finalName)
	run.rev = pd.rev
	spec.Revision = pd.rev
	if r, ok := readFinal(run.final, pd.rev); ok {
		p.log.Info("pod already ended; its final report is sent again", "workload", r.GetWorkload(), "pod", r.GetPodIndex(), "state", r.GetState())
		p.reporter.send(nodemanager.RunKey(p.cfg.Node, b.Project, b.Workload, b.Pod), r, nil)
		return
	}
	mounts, cloned, err := data.mounts(ctx, rec, pd.rev)
	if err != nil {
		run.report(workloadv1.PodState_POD_STATE_FAILED, 0, err.Error())
		return
	}
	spec.Mounts = mounts
	run.restarts = readRestarts(rec, pd.rev)
	spec.Restarting = func() { // counted before the run starts again: an agent killed meanwhile still says it
		run.restarts++
		if err := writeRestarts(rec, pd.rev, run.restarts); err != nil {
			p.log.Error("restart count not kept on disk", "workload", run.workload, "pod", b.Pod, "err", err)
		}
		if p.cfg.Restarts != nil {
			p.cfg.Restarts.WithLabelValues(p.cfg.Node).Inc()
		}
	}
	if !p.awaitWorkers(ctx, b, spec, run, pd.stop) {
		run.report(workloadv1.PodState_POD_STATE_STOPPED, 0, "stopped before its workers ran")
		return
	}
	proc, err := p.runner.Start(spec)
	if err != nil {
		run.report(workloadv1.PodState_POD_STATE_FAILED, 0, err.Error())
		return
	}
	switch proc.Origin() {
	case runner.Adopted:
		p.log.Info("pod adopted: it outlived the agent that started it", "workload", run.workload, "pod", b.Pod)
	case runner.Restarted:
		p.log.Warn("pod started again: it died while its node agent was down", "workload", run.workload, "pod", b.Pod, "restarts", run.restarts)
	}
	p.running.set(spec.ID, true)
	run.setPorts(proc)
	run.report(workloadv1.PodState_POD_STATE_RUNNING, 0, cloned)
	if p.cfg.Usage != nil {
		p.cfg.Usage.add(p.cfg.Node, b, p.runner, proc)
		defer p.cfg.Usage.remove(proc)
	}
	if len(b.Devices) > 0 {
		p.gpus.add(&gpuPod{id: spec.ID, b: b, proc: proc, limit: spec.GPUMemoryBytes, run: run})
		defer p.gpus.remove(spec.ID)
	}
	oom, replaced := "", false
	select {
	case <-proc.Done():
	case <-pd.stop:
		replaced = pd.replaced
		proc.Stop(context.WithoutCancel(ctx))
	case oom = <-run.oom:
		proc.Kill()
	}
	ex := proc.Exit()
	p.running.set(spec.ID, false)
	switch {
	case replaced:
		// Its run key is the new placement's now: a STOPPED report would
		// read as the moved pod's.
	case oom != "":
		run.report(workloadv1.PodState_POD_STATE_FAILED, ex.Code, oom)
	case ex.OOMKilled:
		run.report(workloadv1.PodState_POD_STATE_FAILED, ex.Code, fmt.Sprintf(
			"Out of memory: the pod went over its memory limit of %s; the kernel killed it.", bytesString(spec.MemoryBytes)))
	case ex.Stopped:
		run.report(workloadv1.PodState_POD_STATE_STOPPED, ex.Code, "Stopped by the node agent.")
	case ex.Code == 0:
		if err := data.upload(ctx, rec); err != nil {
			run.report(workloadv1.PodState_POD_STATE_FAILED, 0, err.Error())
			break
		}
		// Said again: a pod that ends before its RUNNING report was stored
		// still has its clones' commits in its events.
		run.report(workloadv1.PodState_POD_STATE_SUCCEEDED, 0, cloned)
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
	oom      chan string               // the out-of-memory reason, once
	final    string                    // where the final report is kept; "" before the pod has a directory
	rev      int64                     // the binding's ModRevision
	restarts int32                     // times started again after dying while no agent ran
	ports    []*workloadv1.PortBinding // where its tools' ports are on the node

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
	req := r.p.reportOf(r.workload, r.index, state, code, msg, r.idle)
	req.AgentRestarts = r.restarts
	if !r.ended {
		req.Ports = r.ports
	}
	if r.ended && r.final != "" {
		if err := writeFinal(r.final, r.rev, req); err != nil {
			r.p.log.Error("final state not kept on disk", "workload", r.workload, "pod", r.index, "err", err)
		}
	}
	r.p.send(req)
}

// setPorts keeps where the started pod's published ports are, for its
// reports (the proxy dials them).
func (r *podRun) setPorts(proc runner.Pod) {
	pub, ok := proc.(runner.Published)
	if !ok {
		return
	}
	addrs := pub.Addresses()
	ports := slices.Sorted(maps.Keys(addrs))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ports = nil
	for _, port := range ports {
		r.ports = append(r.ports, &workloadv1.PortBinding{ContainerPort: int32(port), Address: addrs[port]})
	}
}

// idleChanged reports the pod RUNNING again with its new idle time.
func (r *podRun) idleChanged(idle time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idle = idle
	if !r.ended {
		req := r.p.reportOf(r.workload, r.index, r.state, 0, "", idle)
		req.AgentRestarts = r.restarts
		req.Ports = r.ports
		r.p.send(req)
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
// command, read from the workload service's key (read only), and what its
// data sources need (podData.mounts, once the pod has a revision).
func (p *pods) spec(ctx context.Context, b nodemanager.Binding) (runner.Spec, podData, error) {
	c := etcdstore.NewCollection(p.cfg.Client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	it, err := c.Get(ctx, b.Project+"/"+b.Workload)
	if err != nil {
		return runner.Spec{}, podData{}, fmt.Errorf("read workload: %w", err)
	}
	ws := clusterproto.PodSpec(it.Msg.GetSpec(), b.Pod) // a distributed training's master runs its own
	cmd := append(append([]string(nil), ws.GetCommand()...), ws.GetArgs()...)
	if len(cmd) == 0 && p.cfg.Engine == "" {
		return runner.Spec{}, podData{}, errors.New("the workload has no command; the process runtime runs commands, not images")
	}
	var env []string
	for _, e := range ws.GetEnv() {
		if e.GetCredential() == nil { // its value comes from the workload service below
			env = append(env, e.GetName()+"="+e.GetValue())
		}
	}
	if !validUID(it.Msg.GetUid()) {
		return runner.Spec{}, podData{}, fmt.Errorf("workload %s has no valid uid", b.WorkloadName())
	}
	id := podID(it.Msg.GetUid(), b.Pod)
	creds, err := p.credentials(ctx, b, ws)
	if err != nil {
		return runner.Spec{}, podData{}, err
	}
	for _, e := range creds.GetEnv() {
		env = append(env, e.GetName()+"="+e.GetValue())
	}
	data := podData{sources: ws.GetDataSources(), tokens: map[int32]*workloadv1.GitToken{}, s3Keys: map[int32]*workloadv1.S3Keys{}}
	for _, t := range creds.GetGitTokens() {
		data.tokens[t.GetDataSourceIndex()] = t
	}
	for _, k := range creds.GetS3Keys() {
		data.s3Keys[k.GetDataSourceIndex()] = k
	}
	var files []runner.File
	for _, f := range creds.GetFiles() {
		files = append(files, runner.File{Path: f.GetPath(), Data: f.GetContent()})
	}
	gangEnv, gangFiles, host, err := p.gang(it.Msg, b.Pod)
	if err != nil {
		return runner.Spec{}, podData{}, err
	}
	env = append(env, gangEnv...)
	files = append(files, gangFiles...)
	var ports []int
	for _, t := range ws.GetTools() {
		ports = append(ports, int(t.GetPort()))
		if t.GetBaseUrl() { // served under the proxy's path (clusterproto.ToolPath)
			env = append(env, clusterproto.ToolBaseURLEnv(t.GetName())+"="+clusterproto.ToolPath(b.WorkloadName(), t.GetName()))
		}
	}
	if sv := ws.GetServing(); sv != nil && !slices.Contains(ports, int(sv.GetPort())) {
		ports = append(ports, int(sv.GetPort()))
	}
	limit := p.gpus.memoryLimit(b, ws.GetGpu().GetGpuMemoryBytes())
	if len(b.Devices) > 0 {
		env = append(env, p.cfg.Backend.PodEnv(p.runner.PodDir(id))...)
		env = append(env, mpsEnv(p.cfg.MPSPipeDir, b, limit)...)
	}
	return runner.Spec{
		ID:       id,
		Image:    ws.GetImage(),
		Command:  cmd,
		Env:      env,
		Workload: b.WorkloadName(), Project: b.Project, WorkloadUID: it.Msg.GetUid(), Pod: b.Pod, Labels: it.Msg.GetLabels(), Hostname: host,
		Devices: b.Devices, CDIDevices: p.gpus.cdiNames(b.Devices), FractionMilli: b.FractionMilli, GPUMemoryBytes: limit,
		MilliCPU: ws.GetMilliCpu(), MemoryBytes: ws.GetMemoryBytes(),
		RunAsRoot: ws.GetSecurity().GetRunAsRoot(), AddCapabilities: ws.GetSecurity().GetAddCapabilities(),
		Files: files, PullPolicy: pullPolicy(ws.GetImagePullPolicy()), Registry: registryAuth(ws.GetRegistryCredential(), creds.GetRegistry()),
		Ports: ports,
	}, data, nil
}

// pullPolicy is the runner's name of a spec's pull policy.
func pullPolicy(p workloadv1.ImagePullPolicy) runner.PullPolicy {
	switch p {
	case workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_ALWAYS:
		return runner.PullAlways
	case workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_NEVER:
		return runner.PullNever
	}
	return runner.PullIfNotPresent
}

// registryAuth is the runner's copy of the registry credential (nil: none).
func registryAuth(name string, a *workloadv1.RegistryAuth) *runner.RegistryAuth {
	if a == nil {
		return nil
	}
	return &runner.RegistryAuth{Credential: name, Server: a.GetServer(), Username: a.GetUsername(), Password: a.GetPassword()}
}

// credentials opens the credentials a pod's spec names, from the workload
// service (nil when it names none). The values go to the runner only:
// never to a report, a log line or the disk record.
func (p *pods) credentials(ctx context.Context, b nodemanager.Binding, ws *workloadv1.WorkloadSpec) (*workloadv1.ResolvePodCredentialsResponse, error) {
	if !clusterproto.NamesCredentials(ws) {
		return nil, nil
	}
	if p.cfg.Credentials == nil {
		return nil, errors.New("the workload names credentials, and this node's agent reaches no workload service to open them (runway agent --workload-address)")
	}
	ctx, cancel := context.WithTimeout(ctx, credentialsTimeout)
	defer cancel()
	req := &workloadv1.ResolvePodCredentialsRequest{Node: nodemanager.NodeName(p.cfg.Node), Workload: b.WorkloadName(), PodIndex: int32(b.Pod)}
	for {
		// WaitForReady: a workload service restarting is waited for, not
		// the pod failed for it.
		resp, err := p.cfg.Credentials.ResolvePodCredentials(ctx, req, grpc.WaitForReady(true))
		if err == nil {
			return resp, nil
		}
		if status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			return nil, fmt.Errorf("open the workload's credentials: %s", status.Convert(err).Message())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("open the workload's credentials: %s", status.Convert(err).Message())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// credentialsTimeout bounds the call that opens a pod's credentials.
const credentialsTimeout = 30 * time.Second

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

// reportOf is a pod's run report.
func (p *pods) reportOf(workload string, index int, state workloadv1.PodState, code int, msg string, idle time.Duration) *nodemanagerv1.ReportWorkloadStateRequest {
	if len(msg) > 1024 {
		msg = strings.ToValidUTF8(msg[:1024], "")
	}
	return &nodemanagerv1.ReportWorkloadStateRequest{
		Node: nodemanager.NodeName(p.cfg.Node), Workload: workload, PodIndex: int32(index),
		State: state, ExitCode: int32(code), Message: msg, ObserveTime: timestamppb.Now(),
		GpuIdleTime: durationpb.New(idle),
	}
}

// send hands a report to the reporter, which stores it (retrying) in a
// batch.
func (p *pods) send(r *nodemanagerv1.ReportWorkloadStateRequest) {
	project, workload, _ := nodemanager.ParseWorkload(r.GetWorkload())
	p.reporter.send(nodemanager.RunKey(p.cfg.Node, project, workload, int(r.GetPodIndex())), r, nil)
}

// writeFinal keeps a pod's final report with its binding's
// revision ("REV\n" then the report), written to a temporary file and
// renamed so that a crash leaves the old file or the new one.
func writeFinal(path string, rev int64, r *nodemanagerv1.ReportWorkloadStateRequest) error {
	b, err := proto.Marshal(r)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(fmt.Appendf(nil, "%d\n", rev), b...))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// readFinal reads the final report kept for the binding written at rev.
func readFinal(path string, rev int64) (*nodemanagerv1.ReportWorkloadStateRequest, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	head, body, ok := strings.Cut(string(b), "\n")
	if !ok || head != strconv.FormatInt(rev, 10) {
		return nil, false
	}
	r := new(nodemanagerv1.ReportWorkloadStateRequest)
	if proto.Unmarshal([]byte(body), r) != nil {
		return nil, false
	}
	return r, true
}

// restartsName is the file in a pod's record directory counting how many
// times its run was started again ("REV N"): a pod restarted by one agent
// and adopted by the next still reports it.
const restartsName = "restarts"

// readRestarts is the restart count kept for the binding written at rev.
func readRestarts(dir string, rev int64) int32 {
	b, err := os.ReadFile(filepath.Join(dir, restartsName))
	var r int64
	var n int32
	if err != nil || len(b) == 0 {
		return 0
	}
	if _, err := fmt.Sscan(string(b), &r, &n); err != nil || r != rev {
		return 0
	}
	return n
}

func writeRestarts(dir string, rev int64, n int32) error {
	tmp := filepath.Join(dir, restartsName+".tmp")
	if err := os.WriteFile(tmp, fmt.Appendf(nil, "%d %d", rev, n), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, restartsName))
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
