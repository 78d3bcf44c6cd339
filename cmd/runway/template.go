package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// templateCommand manages templates: named submissions (a type, an
// environment, a compute resource and any submit flags), reused with
// `submit --template NAME`, whose own flags override them.
func templateCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "template", Aliases: []string{"templates"},
		Short: "Templates: named submissions (type, environment, compute resource, any submit flag), reused with submit --template"}
	cmd.AddCommand(templateCreateCommand(), templateDescribeCommand(), templateCopyCommand(), templateRenameCommand())
	list := assetListCommand("template", func(ctx context.Context, c *sdk.Client, scope sdk.Scope, w io.Writer, output string) error {
		ts, err := sdk.Collect(c.Templates(ctx, scope))
		if err != nil || output != formatTable {
			return orPrint(err, w, output, ts)
		}
		t := newTable(w, "Template", "Type", "Environment", "Compute Resource", "Image", "Per Pod")
		for _, tm := range ts {
			t.row(tm.GetName(), orDefault(templateType(tm), "any"), orDefault(tm.GetEnvironment(), "-"),
				orDefault(tm.GetComputeResource(), "-"), orDefault(tm.GetSpec().GetImage(), "-"), perPod(tm.GetSpec()))
		}
		return t.flush()
	})
	del := assetDeleteCommand("template", func(ctx context.Context, c *sdk.Client, s sdk.Scope, id string) (string, error) {
		return s.TemplateName(id), c.DeleteTemplate(ctx, s, id)
	})
	cmd.AddCommand(list, del)
	return cmd
}

func templateCreateCommand() *cobra.Command {
	var (
		s         scopeFlags
		f         submitFlags
		typ, desc string
	)
	const pods = "pods"
	create := &cobra.Command{
		Use:   "create NAME [-p PROJECT | --department D] [--type TYPE] [submit flags] [-- COMMAND ARGS...]",
		Short: "Create a template from submit flags",
		Long: `Create a template: any flag of submit (image, GPUs, CPU, memory, pods,
priority, node pools, variables, an environment with -e NAME, a compute
resource with --compute) and the command after --. A submit that names it
with --template gets these values for every flag it does not give itself.`,
		Example: `  runway template create pytorch-1gpu --type training -e pytorch --compute one-gpu --pods 2
  runway template create notebook --department research --type workspace -i jupyter/base-notebook -g 0.5 -- jupyter lab`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := s.scope()
			if err != nil {
				return err
			}
			if dash := cmd.ArgsLenAtDash(); (dash == -1 && len(args) > 1) || dash > 1 {
				return usageError("one template name, then the command after --")
			}
			spec, err := f.spec(args[1:])
			if err != nil {
				return usageError("%v", err)
			}
			if !cmd.Flags().Changed(pods) {
				spec.Pods = 0 // unset: the submission's, else 1
			}
			t := &workloadv1.Template{Description: desc, Environment: f.environment, ComputeResource: f.compute, Spec: spec}
			if typ != "" {
				if err := checkType(typ); err != nil {
					return err
				}
				t.Type = workloadv1.WorkloadType(workloadv1.WorkloadType_value["WORKLOAD_TYPE_"+strings.ToUpper(typ)])
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				got, err := c.CreateTemplate(ctx, scope, args[0], t)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "template %q created\n", got.GetName())
				return nil
			})
		},
	}
	s.add(create)
	f.addFlags(create.Flags(), pods)
	create.Flags().StringVar(&typ, "type", "", "the workload type it submits: workspace, training or inference (default: any)")
	create.Flags().StringVar(&desc, "description", "", "free text for people")
	return create
}

func templateDescribeCommand() *cobra.Command {
	var (
		s      scopeFlags
		output string
	)
	cmd := &cobra.Command{
		Use:     "describe NAME [-p PROJECT | --department D]",
		Short:   "Show a template",
		Example: "  runway template describe pytorch-1gpu\n  runway template describe notebook --department research -o yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := s.scope()
			if err != nil {
				return err
			}
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				t, err := c.GetTemplate(ctx, scope, args[0])
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(cmd.OutOrStdout(), output, false, t)
				}
				describeTemplate(cmd.OutOrStdout(), t)
				return nil
			})
		},
	}
	s.add(cmd)
	outputFlag(cmd, &output)
	return cmd
}

// describeTemplate prints a template for people; variables by name only
// (-o yaml shows their values).
func describeTemplate(out io.Writer, t *workloadv1.Template) {
	spec := t.GetSpec()
	f := fields{w: out}
	f.add("Name", t.GetName())
	f.add("Description", orDefault(t.GetDescription(), "-"))
	f.add("Type", orDefault(templateType(t), "any"))
	f.add("Environment", orDefault(t.GetEnvironment(), "-"))
	f.add("Compute Resource", orDefault(t.GetComputeResource(), "-"))
	f.add("Image", orDefault(spec.GetImage(), "-"))
	f.add("Command", orDefault(strings.Join(append(spec.GetCommand(), spec.GetArgs()...), " "), "-"))
	f.add("Per Pod", perPod(spec))
	if n := spec.GetPods(); n > 0 {
		f.add("Pods", fmt.Sprint(n))
	}
	f.add("Priority", orDefault(spec.GetPriority(), "-"))
	f.add("Node Pools", orDefault(strings.Join(spec.GetNodePools(), ", "), "-"))
	f.add("Node Type", orDefault(spec.GetNodeType(), "-"))
	var vars []string
	for _, v := range spec.GetEnv() {
		vars = append(vars, v.GetName())
	}
	f.add("Variables", orDefault(strings.Join(vars, ", "), "-"))
	f.flush()
}

func templateType(t *workloadv1.Template) string {
	if t.GetType() == workloadv1.WorkloadType_WORKLOAD_TYPE_UNSPECIFIED {
		return ""
	}
	return strings.ToLower(kindLabel(t.GetType()))
}

// templateCopyCommand copies a template under a new id, to its own scope
// or another one (--to-project, --to-department, --to-account).
func templateCopyCommand() *cobra.Command {
	var (
		s, to     scopeFlags
		toAccount bool
	)
	cmd := &cobra.Command{
		Use:     "copy NAME NEW [-p PROJECT | --department D] [--to-project P | --to-department D | --to-account]",
		Short:   "Copy a template under a new name, in its scope or another",
		Example: "  runway template copy pytorch-1gpu pytorch-2gpu\n  runway template copy notebook notebook --department research --to-project team-a",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			from, err := s.scope()
			if err != nil {
				return err
			}
			dest, err := to.scope()
			if err != nil {
				return err
			}
			switch {
			case toAccount && dest != (sdk.Scope{}):
				return usageError("--to-account and --to-project/--to-department are exclusive")
			case !toAccount && dest == (sdk.Scope{}):
				dest = from // its own scope
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				t, err := c.GetTemplate(ctx, from, args[0])
				if err != nil {
					return err
				}
				got, err := c.CreateTemplate(ctx, dest, args[1], t)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "template %q copied to %q\n", t.GetName(), got.GetName())
				return nil
			})
		},
	}
	s.add(cmd)
	cmd.Flags().StringVar(&to.project, "to-project", "", "copy into this project")
	cmd.Flags().StringVar(&to.department, "to-department", "", "copy into this department")
	cmd.Flags().BoolVar(&toAccount, "to-account", false, "copy to the account")
	cmd.MarkFlagsMutuallyExclusive("to-project", "to-department", "to-account")
	return cmd
}

func templateRenameCommand() *cobra.Command {
	var s scopeFlags
	cmd := &cobra.Command{
		Use:     "rename NAME NEW [-p PROJECT | --department D]",
		Short:   "Rename a template in its scope (one transaction)",
		Example: "  runway template rename pytorch-1gpu pytorch-one-gpu",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := s.scope()
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				got, err := c.RenameTemplate(ctx, scope, args[0], args[1])
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "template %q renamed to %q\n", scope.TemplateName(args[0]), got.GetName())
				return nil
			})
		},
	}
	s.add(cmd)
	return cmd
}
