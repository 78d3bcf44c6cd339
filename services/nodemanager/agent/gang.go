package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/etcdstore"
	"github.com/runwayhq/runway/pkg/framework"
	"github.com/runwayhq/runway/pkg/runner"
	"github.com/runwayhq/runway/services/nodemanager"
)

// gang is what pod of a distributed training gets beyond a plain pod: its
// framework's variables, the MPI hostfile, and its host name. The
// container runtime names pods on the workload's own network; the process
// runtime has one network, so every pod is at 127.0.0.1 with a port of its
// own, and is for one machine. Nothing for a workload that is not
// distributed.
func (p *pods) gang(w *workloadv1.Workload, pod int) (env []string, files []runner.File, host string, err error) {
	addressing := clusterproto.Loopback(w)
	if p.cfg.Engine != "" {
		addressing = clusterproto.Named(w, "")
	}
	g, ok := clusterproto.Gang(w, addressing)
	if !ok {
		return nil, nil, "", nil
	}
	if env, err = g.Env(pod); err != nil {
		return nil, nil, "", fmt.Errorf("distributed training: %w", err)
	}
	if g.Kind == framework.MPI {
		files = []runner.File{{Path: framework.HostfilePath, Data: g.Hostfile()}}
	}
	if p.cfg.Engine != "" {
		host = framework.Host(clusterproto.ID(w.GetName()), pod)
	}
	return env, files, host, nil
}

// launcherPoll is how often an MPI launcher's agent reads whether the
// workers run.
const launcherPoll = 500 * time.Millisecond

// awaitWorkers holds an MPI training's launcher (pod 0) until every worker
// is reported RUNNING in the workload's status (their agents' reports, so
// on any node): mpirun then finds each host of its hostfile up. It reports
// the launcher STARTING meanwhile, and false when the pod is stopped first.
func (p *pods) awaitWorkers(ctx context.Context, b nodemanager.Binding, spec runner.Spec, run *podRun, stop <-chan struct{}) bool {
	// Only MPI pods get the hostfile (gang): no read for any other pod.
	if b.Pod != 0 || !slices.ContainsFunc(spec.Files, func(f runner.File) bool { return f.Path == framework.HostfilePath }) {
		return true
	}
	c := etcdstore.NewCollection(p.cfg.Client, etcdstore.PrefixWorkloads, func() *workloadv1.Workload { return new(workloadv1.Workload) })
	reported := false
	for {
		it, err := c.Get(ctx, b.Project+"/"+b.Workload)
		if err == nil {
			w := it.Msg
			if w.GetSpec().GetDistributed().GetFramework() != workloadv1.Framework_FRAMEWORK_MPI {
				return true
			}
			n := int(clusterproto.EffectivePods(w.GetSpec()))
			if workersRunning(w.GetStatus().GetPods(), n) {
				return true
			}
			if !reported {
				run.report(workloadv1.PodState_POD_STATE_STARTING, 0, fmt.Sprintf("the launcher waits for its %d workers to run", n-1))
				reported = true
			}
		}
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		case <-time.After(launcherPoll):
		}
	}
}

// workersRunning reports whether pods 1..n-1 are all RUNNING.
func workersRunning(pods []*workloadv1.PodStatus, n int) bool {
	running := 0
	for _, ps := range pods {
		if ps.GetIndex() > 0 && ps.GetState() == workloadv1.PodState_POD_STATE_RUNNING {
			running++
		}
	}
	return running == n-1
}
