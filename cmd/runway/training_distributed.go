package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
)

// distributedFlags are `runway training submit`'s flags of a distributed
// training: with --framework, pod 0 is the master and --workers more pods
// are its workers.
type distributedFlags struct {
	framework, restartPolicy                                       string
	masterImage, masterCommand, masterGPU, masterCPU, masterMemory string
	minWorkers, backoffLimit                                       int32
}

var frameworks = map[string]workloadv1.Framework{
	"pytorch":    workloadv1.Framework_FRAMEWORK_PYTORCH,
	"mpi":        workloadv1.Framework_FRAMEWORK_MPI,
	"tensorflow": workloadv1.Framework_FRAMEWORK_TENSORFLOW,
	"jax":        workloadv1.Framework_FRAMEWORK_JAX,
	"xgboost":    workloadv1.Framework_FRAMEWORK_XGBOOST,
}

var restartPolicies = map[string]workloadv1.RestartPolicy{
	"never":      workloadv1.RestartPolicy_RESTART_POLICY_NEVER,
	"on-failure": workloadv1.RestartPolicy_RESTART_POLICY_ON_FAILURE,
}

const distributedHelp = `

With --framework the training is distributed: pod 0 is the master (the
launcher for mpi) and --workers N more pods, 1..N, are its workers, all
placed as one gang (or at least --min-workers of them, PyTorch only). The
workers run the command after --; the master runs --master-command (with
/bin/sh -c, so $MASTER_PORT and the like expand) and has its own
--master-gpu, --master-cpu, --master-memory and --master-image where given.
Each pod gets its framework's variables (MASTER_ADDR, RANK, WORLD_SIZE,
TF_CONFIG, ...; see pkg/framework) and reaches the others by name:
{NAME}-master-0 and {NAME}-worker-K in the container and Kubernetes
runtimes. The process runtime (no network of its own) is for one machine:
every address is 127.0.0.1, with the ports in the variables.
`

func (d *distributedFlags) addFlags(fl *pflag.FlagSet) {
	fl.StringVar(&d.framework, "framework", "", "make the training distributed: pytorch, mpi, tensorflow, jax or xgboost (a master and --workers workers)")
	fl.StringVar(&d.masterImage, "master-image", "", "the master's image (default: the workers')")
	fl.StringVar(&d.masterCommand, "master-command", "", "the master's command, run with /bin/sh -c (default: the workers')")
	fl.StringVar(&d.masterGPU, "master-gpu", "", "the master's GPUs, 0 for none (default: the workers')")
	fl.StringVar(&d.masterCPU, "master-cpu", "", "the master's CPU cores (default: the workers')")
	fl.StringVar(&d.masterMemory, "master-memory", "", "the master's host memory, such as 4G (default: the workers')")
	fl.Int32Var(&d.minWorkers, "min-workers", 0, "elastic PyTorch: run once the master and this many workers are placed (default: all)")
	fl.StringVar(&d.restartPolicy, "restart-policy", "", "when a pod fails: never (the training fails) or on-failure (the whole gang restarts)")
	fl.Int32Var(&d.backoffLimit, "backoff-limit", 0, "with --restart-policy on-failure, how many gang restarts before the training fails (0: 6)")
}

// apply makes spec distributed when --framework is given: pods become 1 +
// workers and the master's fields are the workers' where no flag says
// otherwise. Master flags without --framework are an error.
func (d *distributedFlags) apply(cmd *cobra.Command, spec *workloadv1.WorkloadSpec) error {
	fl := cmd.Flags()
	if d.framework == "" {
		for _, name := range []string{"master-image", "master-command", "master-gpu", "master-cpu", "master-memory", "min-workers", "restart-policy", "backoff-limit"} {
			if fl.Changed(name) {
				return usageError("--%s is for a distributed training: give --framework too", name)
			}
		}
		return nil
	}
	fw, ok := frameworks[d.framework]
	if !ok {
		return usageError("--framework %q: want pytorch, mpi, tensorflow, jax or xgboost", d.framework)
	}
	if !fl.Changed("workers") || spec.GetPods() < 1 {
		return usageError("--workers N (1 or more) is required with --framework")
	}
	dist := &workloadv1.DistributedSpec{Framework: fw, BackoffLimit: d.backoffLimit}
	if d.restartPolicy != "" {
		rp, ok := restartPolicies[d.restartPolicy]
		if !ok {
			return usageError("--restart-policy %q: want never or on-failure", d.restartPolicy)
		}
		dist.RestartPolicy = rp
	}
	workers := spec.GetPods()
	spec.Pods = 1 + workers
	if fl.Changed("min-workers") {
		if d.minWorkers < 1 || d.minWorkers > workers {
			return usageError("--min-workers %d: want 1 to --workers (%d)", d.minWorkers, workers)
		}
		spec.MinPods = 1 + d.minWorkers
	}
	m, err := d.master(fl, spec)
	if err != nil {
		return usageError("%v", err)
	}
	dist.Master = m
	spec.Distributed = dist
	return nil
}

// master is the master's spec: the workers' resources with the flags given
// over them; nil when no master flag is given (the master is a worker's
// copy).
func (d *distributedFlags) master(fl *pflag.FlagSet, spec *workloadv1.WorkloadSpec) (*workloadv1.MasterSpec, error) {
	changed := false
	for _, name := range []string{"master-image", "master-command", "master-gpu", "master-cpu", "master-memory"} {
		changed = changed || fl.Changed(name)
	}
	if !changed {
		return nil, nil
	}
	m := &workloadv1.MasterSpec{Image: d.masterImage, Gpu: spec.GetGpu(), MilliCpu: spec.GetMilliCpu(), MemoryBytes: spec.GetMemoryBytes()}
	if d.masterCommand != "" {
		m.Command = []string{"/bin/sh", "-c", d.masterCommand}
	}
	var err error
	switch g := strings.TrimSpace(d.masterGPU); {
	case !fl.Changed("master-gpu"):
	case g == "0":
		m.Gpu = nil
	default:
		if m.Gpu, err = parseGPU(g); err != nil {
			return nil, fmt.Errorf("--master-gpu: %w", err)
		}
	}
	if fl.Changed("master-cpu") {
		if m.MilliCpu, err = parseCPU(d.masterCPU); err != nil {
			return nil, fmt.Errorf("--master-cpu: %w", err)
		}
	}
	if fl.Changed("master-memory") {
		if m.MemoryBytes, err = parseBytes(d.masterMemory); err != nil {
			return nil, fmt.Errorf("--master-memory: %w", err)
		}
	}
	return m, nil
}
