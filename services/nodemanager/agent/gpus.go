package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/gpu"
	"github.com/runwayhq/runway/pkg/gpumetrics"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/pkg/runner/timeslicer"
	"github.com/runwayhq/runway/pkg/timeslice"
	"github.com/runwayhq/runway/services/nodemanager"
)

// DefaultSampleInterval is Config.SampleInterval when 0.
const DefaultSampleInterval = time.Second

// gpuPod is a running pod that holds GPUs, as the GPU manager tracks it.
type gpuPod struct {
	id    string // {workload uid}.{pod}; a Kubernetes pod's UID
	b     nodemanager.Binding
	proc  podProcs
	limit int64 // device memory it may hold on each device; 0 is no limit
	run   podReports
	idle  *gpumetrics.Idle // touched by the sampling loop only
}

// podProcs is what the GPU manager needs of a pod's processes: a
// runner.Pod the agent started, or a pod the kubelet runs
// (kubelet.Pod).
type podProcs interface {
	Pid() int
	Dir() string
	Owns(pid int) bool
	timeslicer.Group
}

// podReports is where the GPU manager's findings about a pod go: the run
// reports of a pod the agent runs (podRun), or the annotations of a
// Kubernetes pod (kubePod).
type podReports interface {
	// outOfMemory ends the pod for reason.
	outOfMemory(reason string)
	// idleChanged reports the pod's new GPU idle time.
	idleChanged(idle time.Duration)
}

// cpuMeter is the CPU time of each pod in one pass for all (at most one
// walk of /proc).
type cpuMeter func(ps []podProcs) []time.Duration

// runnerCPU measures the pods of r, which are all runner.Pods.
func runnerCPU(r runner.Runner) cpuMeter {
	return func(ps []podProcs) []time.Duration {
		procs := make([]runner.Pod, len(ps))
		for i, p := range ps {
			procs[i] = p.(runner.Pod)
		}
		return r.CPU(procs...)
	}
}

// gpuManager samples the node's GPUs for the pods on them: it ends a pod
// over its memory slice, keeps each pod's GPU idle time (reported when it
// changes), exports the Prometheus series, and computes and enforces the
// time-slicing plan of each shared device.
type gpuManager struct {
	cfg     Config
	devices []gpu.DeviceInfo
	cpu     cpuMeter
	log     *slog.Logger

	mu   sync.Mutex
	pods map[string]*gpuPod

	// health gets the unhealthy devices whenever they change.
	health chan map[int]string

	// The sampling loop's own state.
	unhealthy map[int]string // as last sent
	enforcers map[int]*enforcer
	plans     map[int]timeslice.Plan // the published ones, by device
	series    map[gpumetrics.Series]bool
}

// enforcer is one device's running timeslicer.
type enforcer struct {
	plan   timeslice.Plan
	pids   map[string]int // the leaders it was started on
	cancel context.CancelFunc
	done   chan struct{}
}

func newGPUManager(cfg Config, devices []gpu.DeviceInfo, cpu cpuMeter, log *slog.Logger) *gpuManager {
	return &gpuManager{cfg: cfg, devices: devices, cpu: cpu, log: log, pods: map[string]*gpuPod{},
		enforcers: map[int]*enforcer{}, plans: map[int]timeslice.Plan{}, series: map[gpumetrics.Series]bool{}}
}

// memoryLimit is the device memory a pod may hold on each of its devices:
// its GPU-memory request, else its fraction of the smallest of its
// devices; 0 (no limit) for whole devices.
func (g *gpuManager) memoryLimit(b nodemanager.Binding, request int64) int64 {
	if request > 0 {
		return request
	}
	if b.FractionMilli >= 1000 {
		return 0
	}
	var limit int64
	for _, d := range b.Devices {
		if d >= 0 && d < len(g.devices) {
			l := g.devices[d].MemoryBytes * b.FractionMilli / 1000
			if limit == 0 || l < limit {
				limit = l
			}
		}
	}
	return limit
}

// cdiBackend is a GPU backend whose devices a container engine reaches by
// CDI name (NVIDIA's: nvidia.com/gpu=UUID).
type cdiBackend interface{ CDIName(gpu.DeviceInfo) string }

// cdiNames are the CDI names of devices where the backend has them (none
// with the simulated backend: its pods get only the environment).
func (g *gpuManager) cdiNames(devices []int) []string {
	c, ok := g.cfg.Backend.(cdiBackend)
	if !ok {
		return nil
	}
	var out []string
	for _, d := range devices {
		if d >= 0 && d < len(g.devices) {
			out = append(out, c.CDIName(g.devices[d]))
		}
	}
	return out
}

func (g *gpuManager) add(p *gpuPod) {
	p.idle = gpumetrics.NewIdle(time.Now(), g.cfg.IdleWindow)
	g.mu.Lock()
	g.pods[p.id] = p
	g.mu.Unlock()
}

func (g *gpuManager) remove(id string) {
	g.mu.Lock()
	delete(g.pods, id)
	g.mu.Unlock()
}

// run samples every interval until ctx is done, then continues every
// stopped process group.
func (g *gpuManager) run(ctx context.Context) {
	defer func() {
		for d := range g.enforcers {
			g.stopEnforcer(d)
		}
	}()
	t := time.NewTicker(g.cfg.SampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		pods := slices.Collect(maps.Values(g.pods))
		g.mu.Unlock()
		slices.SortFunc(pods, func(a, b *gpuPod) int { return strings.Compare(a.id, b.id) })
		g.checkHealth()
		g.sample(pods)
		g.slice(ctx, pods)
	}
}

// checkHealth sends the backend's unhealthy devices to the registration
// when they changed (the latest replaces one not yet taken).
func (g *gpuManager) checkHealth() {
	h, ok := g.cfg.Backend.(gpu.Health)
	if !ok || g.health == nil {
		return
	}
	bad := h.Unhealthy()
	if maps.Equal(bad, g.unhealthy) {
		return
	}
	g.unhealthy = bad
	for {
		select {
		case g.health <- bad:
			return
		case <-g.health: // drop the stale one
		}
	}
}

// onDevice lists the pods holding device d.
func onDevice(pods []*gpuPod, d int) []*gpuPod {
	var out []*gpuPod
	for _, p := range pods {
		if slices.Contains(p.b.Devices, d) {
			out = append(out, p)
		}
	}
	return out
}

// sample measures every device, ends pods over their memory slice, and
// updates the idle times and the metrics. The pods' processes are read
// once for all devices (at most one walk of /proc).
func (g *gpuManager) sample(pods []*gpuPod) {
	now := time.Now()
	procs := make([]podProcs, len(pods))
	for i, p := range pods {
		procs[i] = p.proc
	}
	cpu := map[string]time.Duration{}
	for i, d := range g.cpu(procs) {
		cpu[pods[i].id] = d
	}
	podUtil := map[string]float64{}
	seen := map[gpumetrics.Series]bool{}
	for _, dev := range g.devices {
		on := onDevice(pods, dev.Index)
		gp := make([]gpu.Pod, len(on))
		for i, p := range on {
			gp[i] = gpu.Pod{Key: p.id, Dir: p.proc.Dir(), CPU: cpu[p.id], Owns: p.proc.Owns}
		}
		u, err := g.cfg.Backend.Sample(dev.Index, gp)
		if err != nil {
			g.log.Warn("GPU not sampled", "device", dev.Index, "err", err)
			continue
		}
		for i, p := range on {
			pu := u.Pods[i]
			podUtil[p.id] += pu.Utilization
			if p.limit > 0 && pu.MemoryBytes > p.limit && g.cfg.MPSPipeDir == "" {
				p.run.outOfMemory(fmt.Sprintf("Out of GPU memory: the pod used %s on GPU %d, over its slice of %s; the node agent ended it.",
					bytesString(pu.MemoryBytes), dev.Index, bytesString(p.limit)))
			}
		}
		if g.cfg.Metrics == nil {
			continue
		}
		ds := gpumetrics.Series{Node: g.cfg.Node, Device: dev.Index}
		g.cfg.Metrics.Set(ds, u.Utilization, u.MemoryUsedBytes, 0)
		seen[ds] = true
		for i, p := range on {
			s := gpumetrics.Series{Node: g.cfg.Node, Device: dev.Index, Project: p.b.Project, Workload: p.b.Workload, Pod: p.b.Pod}
			g.cfg.Metrics.Set(s, u.Pods[i].Utilization, u.Pods[i].MemoryBytes, p.idle.Value().Seconds())
			seen[s] = true
		}
	}
	for _, p := range pods {
		if idle, changed := p.idle.Observe(now, podUtil[p.id]); changed {
			p.run.idleChanged(idle)
		}
	}
	for s := range g.series {
		if !seen[s] {
			g.cfg.Metrics.Delete(s)
		}
	}
	g.series = seen
}

// slice recomputes each device's time-slicing plan from the pool's
// settings and the fractional pods on it, restarts the enforcer of a
// device whose plan or processes changed, and publishes the node's plan
// when it changed.
func (g *gpuManager) slice(ctx context.Context, pods []*gpuPod) {
	ts, err := g.poolTimeSlicing(ctx)
	if err != nil {
		g.log.Warn("time-slicing settings not read; keeping the current plans", "err", err)
		return
	}
	mode, lease, precision := planSettings(ts)
	changed := false
	for _, dev := range g.devices {
		var sharers []timeslice.Sharer
		pids := map[string]int{}
		groups := map[string]timeslicer.Group{}
		for _, p := range onDevice(pods, dev.Index) {
			if p.b.FractionMilli < 1000 {
				sharers = append(sharers, timeslice.Sharer{ID: p.id, FractionMilli: p.b.FractionMilli})
				pids[p.id] = p.proc.Pid()
				groups[p.id] = p.proc
			}
		}
		var plan timeslice.Plan
		if mode != timeslice.Off && len(sharers) > 0 {
			if plan, err = timeslice.New(mode, lease, precision, sharers); err != nil {
				g.log.Error("no time-slicing plan", "device", dev.Index, "err", err)
			}
		}
		old := g.plans[dev.Index]
		if !timeslice.Equal(old, plan) {
			changed = true
			if plan.Leases == 0 {
				delete(g.plans, dev.Index)
			} else {
				g.plans[dev.Index] = plan
			}
		}
		e := g.enforcers[dev.Index]
		if e != nil && (!timeslice.Equal(e.plan, plan) || !maps.Equal(e.pids, pids)) {
			g.stopEnforcer(dev.Index)
			e = nil
		}
		if e == nil && plan.Leases > 0 {
			ectx, cancel := context.WithCancel(ctx)
			e = &enforcer{plan: plan, pids: pids, cancel: cancel, done: make(chan struct{})}
			g.enforcers[dev.Index] = e
			go func() {
				defer close(e.done)
				timeslicer.Run(ectx, plan, groups)
			}()
		}
	}
	if changed {
		g.publish(ctx, pods)
	}
}

func (g *gpuManager) stopEnforcer(d int) {
	e := g.enforcers[d]
	e.cancel()
	<-e.done
	delete(g.enforcers, d)
}

// publish stores the node's plans for GetTimeSlicePlan.
func (g *gpuManager) publish(ctx context.Context, pods []*gpuPod) {
	byID := map[string]*gpuPod{}
	for _, p := range pods {
		byID[p.id] = p
	}
	out := &nodemanagerv1.TimeSlicePlan{Name: nodemanager.PlanName(g.cfg.Node), UpdateTime: timestamppb.Now()}
	for _, d := range slices.Sorted(maps.Keys(g.plans)) {
		out.Devices = append(out.Devices, devicePlan(d, g.plans[d], byID))
	}
	if err := nodemanager.PutPlan(ctx, g.cfg.Client, g.cfg.Node, out); err != nil {
		g.log.Error("time-slicing plan not published", "err", err)
		clear(g.plans) // publish again on the next sample
	}
}

func devicePlan(d int, p timeslice.Plan, byID map[string]*gpuPod) *nodemanagerv1.DeviceTimeSlicePlan {
	mode := quotav1.TimeSlicingMode_TIME_SLICING_MODE_STRICT
	if p.Mode == timeslice.Fair {
		mode = quotav1.TimeSlicingMode_TIME_SLICING_MODE_FAIR
	}
	dp := &nodemanagerv1.DeviceTimeSlicePlan{DeviceIndex: int32(d), Mode: mode,
		LeaseDuration: durationpb.New(p.Lease), PrecisionPercent: int32(100 / p.Leases),
		PlanDuration: durationpb.New(p.Duration())}
	for _, s := range p.Slots {
		ts := &nodemanagerv1.TimeSlot{SharePercent: int32(s.Count * 100 / p.Leases),
			Offset: durationpb.New(time.Duration(s.First) * p.Lease), Duration: durationpb.New(time.Duration(s.Count) * p.Lease)}
		if pod := byID[s.ID]; pod != nil {
			ts.Workload, ts.PodIndex = pod.b.WorkloadName(), int32(pod.b.Pod)
		}
		dp.Slots = append(dp.Slots, ts)
	}
	return dp
}

// poolTimeSlicing reads the time-slicing settings of the node's pool (nil
// when the pool is not stored: time slicing off).
func (g *gpuManager) poolTimeSlicing(ctx context.Context) (*quotav1.TimeSlicing, error) {
	nodes := etcdstore.NewCollection(g.cfg.Client, etcdstore.PrefixNodes, func() *nodemanagerv1.Node { return new(nodemanagerv1.Node) })
	n, err := nodes.Get(ctx, g.cfg.Node)
	if err != nil {
		return nil, fmt.Errorf("read node %s: %w", g.cfg.Node, err)
	}
	pool, ok := strings.CutPrefix(n.Msg.GetNodePool(), "nodepools/")
	if !ok {
		return nil, nil
	}
	pools := etcdstore.NewCollection(g.cfg.Client, etcdstore.PrefixNodePools, func() *quotav1.NodePool { return new(quotav1.NodePool) })
	np, err := pools.Get(ctx, pool)
	switch {
	case err == nil:
		return np.Msg.GetTimeSlicing(), nil
	case errors.Is(err, etcdstore.ErrNotFound):
		return nil, nil
	}
	return nil, fmt.Errorf("read node pool %s: %w", pool, err)
}

// planSettings maps a pool's settings to the plan's, with the defaults.
func planSettings(ts *quotav1.TimeSlicing) (timeslice.Mode, time.Duration, int) {
	mode := timeslice.Off
	switch ts.GetMode() {
	case quotav1.TimeSlicingMode_TIME_SLICING_MODE_STRICT:
		mode = timeslice.Strict
	case quotav1.TimeSlicingMode_TIME_SLICING_MODE_FAIR:
		mode = timeslice.Fair
	}
	lease := timeslice.DefaultLease
	if d := ts.GetLeaseDuration(); d != nil && d.AsDuration() > 0 {
		lease = d.AsDuration()
	}
	precision := timeslice.DefaultPrecision
	if p := ts.GetPrecisionPercent(); p != 0 {
		precision = int(p)
	}
	return mode, lease, precision
}

// bytesString writes a byte count in GiB or MiB, for people.
func bytesString(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
