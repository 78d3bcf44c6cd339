package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// environmentCommand manages environments: named images with their command,
// arguments and variables, reused with `submit --environment NAME`.
func environmentCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "environment", Aliases: []string{"environments"},
		Short: "Environments: named image, command, arguments and variables, reused at submit"}
	var (
		s                    scopeFlags
		image, pull, regCred string
		env                  []string
		tools                []string
		desc                 string
	)
	create := &cobra.Command{
		Use:   "create NAME -i IMAGE [-p PROJECT | --department D] [-e NAME=VALUE] [--pull-policy P] [--registry-credential NAME] [-- COMMAND ARGS...]",
		Short: "Create an environment",
		Long: `Create an environment: an image with its command, arguments and variables,
how its image is pulled, reused with submit --environment NAME.

A plain environment variable (-e NAME=VALUE) is no place for a secret:
everyone who may view the environment reads its values. Put secrets in a
credential (runway credential create) and name its key instead,
-e VAR=credential:NAME/KEY: the value is read when each pod starts and no
response shows it.

--pull-policy is when the image is pulled: always, if-not-present (the
default) or never. --registry-credential names a registry credential
(runway credential create registry) of the image's registry to pull it
with.

--tool NAME=TYPE:PORT names a web tool its workloads serve on a container
port (TYPE jupyter, vscode, tensorboard or custom): a running workload's
tool is at the tool proxy's /proxy/projects/P/workloads/W/NAME/, for
whoever may view the workload (workload describe prints the URL). /PATH
after the port is the path the tool serves under on the pod; ",base-url"
tells the tool the proxy path instead (RUNWAY_TOOL_{NAME}_BASE_URL, as
Jupyter's --ServerApp.base_url wants), and requests keep it.`,
		Example: "  runway environment create jupyter -i jupyter/base-notebook --tool lab=jupyter:8888,base-url -- sh -c 'exec jupyter lab --ServerApp.base_url=$RUNWAY_TOOL_LAB_BASE_URL'\n  runway environment create pytorch --department research -i pytorch -e NCCL_DEBUG=INFO\n  runway environment create tracked -p team-a -i pytorch -e WANDB_API_KEY=credential:wandb/WANDB_API_KEY\n  runway environment create private -p team-a -i registry.example.com:5000/team/train:1 --registry-credential reg --pull-policy always",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := s.scope()
			if err != nil {
				return err
			}
			if dash := cmd.ArgsLenAtDash(); (dash == -1 && len(args) > 1) || dash > 1 {
				return usageError("one environment name, then the command after --")
			}
			policy, err := pullPolicy(pull)
			if err != nil {
				return err
			}
			e := &workloadv1.Environment{Image: image, Description: desc, Command: args[1:], ImagePullPolicy: policy, RegistryCredential: regCred}
			for _, kv := range env {
				ev, ok := envVar(kv)
				if !ok {
					return usageError("-e %q: want NAME=VALUE or NAME=credential:CREDENTIAL/KEY", kv)
				}
				e.Env = append(e.Env, ev)
			}
			for _, s := range tools {
				t, err := parseTool(s)
				if err != nil {
					return err
				}
				e.Tools = append(e.Tools, t)
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				got, err := c.CreateEnvironment(ctx, scope, args[0], e)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "environment %q created\n", got.GetName())
				return nil
			})
		},
	}
	s.add(create)
	create.Flags().StringVarP(&image, "image", "i", "", "the container image (required)")
	create.Flags().StringArrayVarP(&env, "environment", "e", nil, "environment variable NAME=VALUE, or NAME=credential:CREDENTIAL/KEY for a secret (repeat); a plain VALUE is shown to every viewer")
	create.Flags().StringArrayVar(&tools, "tool", nil, "a tool its workloads serve, reached through the tool proxy: "+toolUsage+" (repeat)")
	create.Flags().StringVar(&desc, "description", "", "free text for people")
	pullFlags(create.Flags(), &pull, &regCred)
	_ = create.MarkFlagRequired("image")

	list := assetListCommand("environment", func(ctx context.Context, c *sdk.Client, scope sdk.Scope, w io.Writer, output string) error {
		es, err := sdk.Collect(c.Environments(ctx, scope))
		if err != nil || output != formatTable {
			return orPrint(err, w, output, es)
		}
		t := newTable(w, "Environment", "Image", "Command", "Variables", "Pull", "Registry credential")
		for _, e := range es {
			var vars []string
			for _, v := range e.GetEnv() {
				vars = append(vars, v.GetName())
			}
			t.row(e.GetName(), e.GetImage(), orDefault(strings.Join(append(e.GetCommand(), e.GetArgs()...), " "), "-"),
				orDefault(strings.Join(vars, ","), "-"), pullPolicyName(e.GetImagePullPolicy()), orDefault(e.GetRegistryCredential(), "-"))
		}
		return t.flush()
	})
	del := assetDeleteCommand("environment", func(ctx context.Context, c *sdk.Client, s sdk.Scope, id string) (string, error) {
		return s.EnvironmentName(id), c.DeleteEnvironment(ctx, s, id)
	})
	cmd.AddCommand(create, list, del)
	return cmd
}

// computeResourceCommand manages compute resources: named per-pod GPU, CPU
// and memory requests, reused with `submit --compute NAME`.
func computeResourceCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "compute-resource", Aliases: []string{"compute-resources", "compute"},
		Short: "Compute resources: named GPU, CPU and memory per pod, reused at submit"}
	var (
		s                           scopeFlags
		gpu, gpuMemory, cpu, memory string
		desc                        string
	)
	create := &cobra.Command{
		Use:     "create NAME [-p PROJECT | --department D] [-g N | --gpu-memory M] [--cpu C] [--memory M]",
		Short:   "Create a compute resource",
		Example: "  runway compute-resource create half-gpu -g 0.5 --cpu 2 --memory 8G",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := s.scope()
			if err != nil {
				return err
			}
			f := submitFlags{gpu: gpu, gpuMemory: gpuMemory, cpu: cpu, memory: memory}
			spec, err := f.spec(nil)
			if err != nil {
				return usageError("%v", err)
			}
			r := &workloadv1.ComputeResource{Description: desc, Gpu: spec.GetGpu(), MilliCpu: spec.GetMilliCpu(), MemoryBytes: spec.GetMemoryBytes()}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				got, err := c.CreateComputeResource(ctx, scope, args[0], r)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "compute resource %q created\n", got.GetName())
				return nil
			})
		},
	}
	s.add(create)
	fl := create.Flags()
	fl.StringVarP(&gpu, "gpu", "g", "", "GPUs per pod: whole devices (1, 2) or a fraction of one (0.5)")
	fl.StringVar(&gpuMemory, "gpu-memory", "", "GPU memory per pod on one device, such as 20G (instead of -g)")
	fl.StringVar(&cpu, "cpu", "", "CPU cores per pod, such as 0.5")
	fl.StringVar(&memory, "memory", "", "host memory per pod, such as 1G")
	fl.StringVar(&desc, "description", "", "free text for people")

	list := assetListCommand("compute-resource", func(ctx context.Context, c *sdk.Client, scope sdk.Scope, w io.Writer, output string) error {
		rs, err := sdk.Collect(c.ComputeResources(ctx, scope))
		if err != nil || output != formatTable {
			return orPrint(err, w, output, rs)
		}
		t := newTable(w, "Compute Resource", "Per Pod")
		for _, r := range rs {
			t.row(r.GetName(), perPod(&workloadv1.WorkloadSpec{Gpu: r.GetGpu(), MilliCpu: r.GetMilliCpu(), MemoryBytes: r.GetMemoryBytes()}))
		}
		return t.flush()
	})
	del := assetDeleteCommand("compute resource", func(ctx context.Context, c *sdk.Client, s sdk.Scope, id string) (string, error) {
		return s.ComputeResourceName(id), c.DeleteComputeResource(ctx, s, id)
	})
	cmd.AddCommand(create, list, del)
	return cmd
}

// orPrint returns err, or prints items as JSON or YAML.
func orPrint[M proto.Message](err error, w io.Writer, output string, items []M) error {
	if err != nil {
		return err
	}
	return printMessages(w, output, true, items...)
}

func assetListCommand(kind string, list func(ctx context.Context, c *sdk.Client, s sdk.Scope, w io.Writer, output string) error) *cobra.Command {
	var (
		s      scopeFlags
		output string
		watch  bool
	)
	cmd := &cobra.Command{
		Use:     "list [-p PROJECT | --department D]",
		Short:   "List the " + kind + "s of the account, a department or a project",
		Example: "  runway " + kind + " list\n  runway " + kind + " list -p team-a",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, err := s.scope()
			if err != nil {
				return err
			}
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				return list(ctx, c, scope, w, output)
			})
		},
	}
	s.add(cmd)
	outputFlag(cmd, &output)
	watchFlag(cmd, &watch)
	return cmd
}

func assetDeleteCommand(kind string, del func(ctx context.Context, c *sdk.Client, s sdk.Scope, id string) (string, error)) *cobra.Command {
	var s scopeFlags
	cmd := &cobra.Command{
		Use:     "delete NAME [-p PROJECT | --department D]",
		Short:   "Delete a " + kind + " (workloads submitted with it keep their values)",
		Example: "  runway " + strings.ReplaceAll(kind, " ", "-") + " delete NAME",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := s.scope()
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				name, err := del(ctx, c, scope, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %q deleted\n", kind, name)
				return nil
			})
		},
	}
	s.add(cmd)
	return cmd
}
