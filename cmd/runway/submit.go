package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// submitFlags are the flags of `runway {training|workspace|inference} submit`.
type submitFlags struct {
	project, image, gpu, gpuMemory, cpu, memory, priority, nodeType string
	autoDelete                                                      time.Duration
	pods                                                            int32
	nodePools, env, labels, annotations, credentials                []string
	environment, compute, template                                  string // assets: an -e value without "=", --compute, --template
	pullPolicy, registryCredential                                  string
	// Relaxations of the container runtime's isolation (spec.security):
	// refused at submit unless a policy of the project allows them.
	runAsRoot       bool
	addCapabilities []string
	data            oneOffFlags
	// An inference workload's endpoint (spec.serving).
	serving serveFlags
}

// submitCommands are the three workload kinds, each with its submit
// command, as the runai CLI v2 has them.
func submitCommands() []*cobra.Command {
	return []*cobra.Command{
		kindCommand("training", workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, "workers",
			"Training: batch work that runs to completion (preemptible by default)"),
		kindCommand("workspace", workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE, "",
			"Workspaces: interactive environments (not preemptible by default)"),
		kindCommand("inference", workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE, "replicas",
			"Inference: serving that runs until deleted (highest priority, never preempted)"),
	}
}

func kindCommand(kind string, typ workloadv1.WorkloadType, podsFlag, short string) *cobra.Command {
	cmd := &cobra.Command{Use: kind, Short: short}
	var f submitFlags
	var d distributedFlags
	sub := &cobra.Command{
		Use:   "submit NAME -p PROJECT -i IMAGE [flags] [-- COMMAND ARGS...]",
		Short: "Submit a " + kind + " workload",
		Long: `Submit a ` + kind + ` workload to a project. -g asks for whole GPUs (2) or a
fraction of one (0.5); --gpu-memory asks for an amount of one GPU's memory
instead. Everything after -- is the command its pods run.

Pods run as the project's uid with no capability; --run-as-root and
--add-capability relax that, and are refused unless a policy of the project
lists the value (rules security.runAsRoot, security.addCapabilities).`,
		Example: fmt.Sprintf(`  runway %[1]s submit a1 -p team-a -i runai.jfrog.io/demo/quickstart -g 1
  runway %[1]s submit half -p team-a -i pytorch -g 0.5 --cpu 0.5 --memory 1G -- python train.py
  runway %[1]s submit big -p team-a -i pytorch --gpu-memory 20G -e EPOCHS=3
  runway %[1]s submit tracked -p team-a -i pytorch --credential wandb --credential hf:/secrets/hf -e TOKEN=credential:git/token`, kind),
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, command := args[0], args[1:]
			if dash := cmd.ArgsLenAtDash(); dash == -1 && len(args) > 1 {
				return usageError("unexpected arguments %q: put the command after --", strings.Join(args[1:], " "))
			} else if dash > 1 {
				return usageError("one workload name, got %q", strings.Join(args[:dash], " "))
			}
			spec, err := f.spec(command)
			if err != nil {
				return usageError("%v", err)
			}
			if spec.Serving, err = f.serving.spec(); err != nil {
				return err
			}
			if f.image == "" && f.environment == "" && f.template == "" {
				return usageError("--image (-i) is required unless --environment or --template names where it comes from")
			}
			if podsFlag != "" && !cmd.Flags().Changed(podsFlag) {
				spec.Pods = 0 // unset: the template's, else 1
			}
			if typ == workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING {
				if err := d.apply(cmd, spec); err != nil {
					return err
				}
			}
			labels, err := keyValues("--label", f.labels)
			if err != nil {
				return err
			}
			annotations, err := keyValues("--annotation", f.annotations)
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				w, err := c.SubmitWorkloadFrom(ctx, f.project, name, &workloadv1.Workload{Type: typ, Spec: spec, Labels: labels, Annotations: annotations},
					sdk.Assets{Template: f.template, Environment: f.environment, ComputeResource: f.compute})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %q submitted to project %s\n", kindLabel(w.GetType()), sdk.ID(w.GetName()), f.project)
				return nil
			})
		},
	}
	projectFlag(sub, &f.project)
	f.addFlags(sub.Flags(), podsFlag)
	if typ == workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING {
		d.addFlags(sub.Flags())
		sub.Long += distributedHelp
		sub.Example += "\n  runway training submit ddp -p team-a -i pytorch --framework pytorch --workers 2 -g 1 --master-gpu 0 --master-command 'torchrun train.py' -- torchrun train.py"
	}
	sub.Flags().StringVar(&f.template, "template", "", "a template to start from; the flags given override it")
	sub.Flags().StringArrayVarP(&f.labels, "label", "l", nil, "a label KEY=VALUE to find the workload by (repeat)")
	sub.Flags().StringArrayVar(&f.annotations, "annotation", nil, "an annotation KEY=VALUE (repeat)")
	if typ == workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE {
		f.serving.add(sub.Flags())
	}
	_ = sub.MarkFlagRequired("project")
	cmd.AddCommand(sub, workloadListCommand(kind, "type = "+strings.TrimPrefix(typ.String(), "WORKLOAD_TYPE_")))
	return cmd
}

// addFlags defines the spec's flags; podsFlag names the pod count's
// ("workers", "replicas"; none when "").
func (f *submitFlags) addFlags(fl *pflag.FlagSet, podsFlag string) {
	fl.StringVarP(&f.image, "image", "i", "", "the container image (required unless an environment or template gives one)")
	fl.StringVarP(&f.gpu, "gpu", "g", "", "GPUs per pod: whole devices (1, 2) or a fraction of one (0.5)")
	fl.StringVar(&f.gpuMemory, "gpu-memory", "", "GPU memory per pod on one device, such as 20G (instead of -g)")
	fl.StringVar(&f.cpu, "cpu", "", "CPU cores per pod, such as 0.5")
	fl.StringVar(&f.memory, "memory", "", "host memory per pod, such as 1G")
	fl.StringVar(&f.priority, "priority", "", "priority class: inference, build, interactive-preemptible or train")
	fl.StringSliceVar(&f.nodePools, "node-pool", nil, "node pools in order of preference (repeat or comma-separate)")
	fl.StringVar(&f.nodeType, "node-type", "", "only nodes whose run.ai/type label has this value")
	fl.StringArrayVarP(&f.env, "environment", "e", nil, "environment variable NAME=VALUE (repeat), NAME=credential:CREDENTIAL/KEY for a credential's key (read when the pod starts), or an environment asset NAME to start from")
	fl.StringVar(&f.compute, "compute", "", "a compute resource to take the GPU, CPU and memory from")
	fl.StringArrayVar(&f.credentials, "credential", nil, "a generic credential: NAME gives each key as an environment variable, NAME:/path as a file under /path (repeat); -e VAR=credential:NAME/KEY gives one key of any credential")
	pullFlags(fl, &f.pullPolicy, &f.registryCredential)
	fl.DurationVar(&f.autoDelete, "auto-delete-after", 0, "delete the workload this long after it finishes, such as 24h (0: keep it)")
	fl.BoolVar(&f.runAsRoot, "run-as-root", false, "run as root (uid 0) in the container instead of the project's uid; only where a policy allows security.runAsRoot")
	fl.StringArrayVar(&f.addCapabilities, "add-capability", nil, "a Linux capability to add, such as NET_RAW (repeat); only those a policy lists in security.addCapabilities")
	f.data.add(fl)
	if podsFlag != "" {
		fl.Int32Var(&f.pods, podsFlag, 1, "number of pods, placed together (gang)")
	}
}

// keyValues parses KEY=VALUE flags into a map; a repeated key is an error.
func keyValues(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError("%s %q: want KEY=VALUE", flag, kv)
		}
		if _, dup := m[k]; dup {
			return nil, usageError("%s %q: %s is given twice", flag, kv, k)
		}
		m[k] = v
	}
	return m, nil
}

// spec builds the workload spec from the flags; errors name the flag.
func (f *submitFlags) spec(command []string) (*workloadv1.WorkloadSpec, error) {
	spec := &workloadv1.WorkloadSpec{Image: f.image, Command: command, Priority: f.priority,
		NodeType: f.nodeType, Pods: f.pods}
	if f.autoDelete < 0 || f.autoDelete%time.Second != 0 {
		return nil, fmt.Errorf("--auto-delete-after %s: want whole seconds, 0 or more", f.autoDelete)
	}
	spec.TtlAfterFinishedSeconds = int64(f.autoDelete / time.Second)
	for _, p := range f.nodePools {
		spec.NodePools = append(spec.NodePools, sdk.NodePoolName(p))
	}
	var err error
	switch {
	case f.gpu != "" && f.gpuMemory != "":
		return nil, fmt.Errorf("-g and --gpu-memory are exclusive: ask for GPUs or for GPU memory")
	case f.gpu != "":
		if spec.Gpu, err = parseGPU(f.gpu); err != nil {
			return nil, err
		}
	case f.gpuMemory != "":
		b, err := parseBytes(f.gpuMemory)
		if err != nil {
			return nil, fmt.Errorf("--gpu-memory: %w", err)
		}
		spec.Gpu = &workloadv1.GpuRequest{Amount: &workloadv1.GpuRequest_GpuMemoryBytes{GpuMemoryBytes: b}}
	}
	if f.cpu != "" {
		if spec.MilliCpu, err = parseCPU(f.cpu); err != nil {
			return nil, fmt.Errorf("--cpu: %w", err)
		}
	}
	if f.memory != "" {
		if spec.MemoryBytes, err = parseBytes(f.memory); err != nil {
			return nil, fmt.Errorf("--memory: %w", err)
		}
	}
	for _, e := range f.env {
		k, _, ok := strings.Cut(e, "=")
		if !ok && f.environment == "" {
			f.environment = e // no "=": an environment asset
			continue
		}
		ev, valid := envVar(e)
		if !ok || k == "" || !valid {
			return nil, fmt.Errorf("-e %q: want NAME=VALUE, NAME=credential:CREDENTIAL/KEY, or one environment name", e)
		}
		spec.Env = append(spec.Env, ev)
	}
	for _, c := range f.credentials {
		m, err := credentialMount(c)
		if err != nil {
			return nil, err
		}
		spec.Credentials = append(spec.Credentials, m)
	}
	if spec.ImagePullPolicy, err = pullPolicy(f.pullPolicy); err != nil {
		return nil, err
	}
	spec.RegistryCredential = f.registryCredential
	if spec.DataSources, err = f.data.mounts(); err != nil {
		return nil, err
	}
	if f.runAsRoot || len(f.addCapabilities) > 0 {
		spec.Security = &workloadv1.ContainerSecurity{RunAsRoot: f.runAsRoot, AddCapabilities: f.addCapabilities}
	}
	return spec, nil
}
