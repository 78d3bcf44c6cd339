package agent

import (
	"fmt"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/clusterproto"
	"github.com/runwayhq/runway/pkg/framework"
	"github.com/runwayhq/runway/pkg/runner"
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
