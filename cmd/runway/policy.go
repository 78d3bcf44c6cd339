package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// scopeFlags choose where a policy or an asset lives: -p PROJECT,
// --department D, or neither for the account.
type scopeFlags struct{ project, department string }

func (s *scopeFlags) add(cmd *cobra.Command) {
	projectFlag(cmd, &s.project)
	cmd.Flags().StringVar(&s.department, "department", "", "the department (instead of -p; neither: the account)")
}

func (s *scopeFlags) scope() (sdk.Scope, error) {
	if s.project != "" && s.department != "" {
		return sdk.Scope{}, usageError("-p and --department are exclusive: a scope is a project, a department or (neither) the account")
	}
	return sdk.Scope{Project: s.project, Department: s.department}, nil
}

// policyScope is the scope of the policy of workload type typ, both checked.
func (s *scopeFlags) policyScope(typ string) (sdk.Scope, error) {
	if err := checkType(typ); err != nil {
		return sdk.Scope{}, err
	}
	return s.scope()
}

// typeFlag adds --type workspace|training|inference (required).
func typeFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "type", "", "the workload type: workspace, training or inference (required)")
	_ = cmd.MarkFlagRequired("type")
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(
		[]string{"workspace", "training", "inference"}, cobra.ShellCompDirectiveNoFileComp))
}

func checkType(t string) error {
	switch t {
	case "workspace", "training", "inference":
		return nil
	}
	return usageError("--type %q: want workspace, training or inference", t)
}

func policyCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Aliases: []string{"policies"},
		Short: "Workload policies: defaults and rules per workload type, for the account, a department or a project"}
	cmd.AddCommand(policySetCommand(), policyGetCommand(), policyDeleteCommand(), policyEffectiveCommand(),
		policyListCommand(), policyApplyCommand())
	return cmd
}

func policySetCommand() *cobra.Command {
	var (
		s    scopeFlags
		typ  string
		file string
	)
	cmd := &cobra.Command{
		Use:   "set --type TYPE [-p PROJECT | --department D] -f FILE",
		Short: "Set (create or replace) a policy from a YAML file",
		Long: `Set the policy of one workload type at a scope from YAML (- reads stdin):

  defaults:            # values a submission gets for fields it leaves unset
    milliCpu: 2000
    gpu: {devices: 1}
  rules:               # per field: required, min, max, step, options, canEdit
    gpu.devices: {max: 2}
    image: {options: [pytorch:25, jax:0.4]}
    nodeType: {required: true}

Fields are named as in the workload spec's JSON form (the REST API's). A
field's rule may be held by one scope of a branch only.`,
		Example: "  runway policy set --type training --department research -f policy.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, err := s.policyScope(typ)
			if err != nil {
				return err
			}
			d, err := loadPolicyDoc(cmd, file)
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				got, err := c.SetPolicy(ctx, scope, typ, d.policy)
				if err != nil {
					return d.explain(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "policy %q set\n", got.GetName())
				return nil
			})
		},
	}
	s.add(cmd)
	typeFlag(cmd, &typ)
	cmd.Flags().StringVarP(&file, "file", "f", "", "the policy in YAML (- for stdin; required)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

func policyGetCommand() *cobra.Command {
	var (
		s           scopeFlags
		typ, output string
	)
	cmd := &cobra.Command{
		Use:     "get --type TYPE [-p PROJECT | --department D]",
		Short:   "Show the policy set at one scope (YAML by default)",
		Example: "  runway policy get --type training --department research",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, err := s.policyScope(typ)
			if err != nil {
				return err
			}
			if output == formatTable {
				output = formatYAML // a policy is a document, not rows
			}
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				p, err := c.GetPolicy(ctx, scope, typ)
				if err != nil {
					return err
				}
				return printMessages(cmd.OutOrStdout(), output, false, p)
			})
		},
	}
	s.add(cmd)
	typeFlag(cmd, &typ)
	outputFlag(cmd, &output)
	return cmd
}

func policyDeleteCommand() *cobra.Command {
	var (
		s   scopeFlags
		typ string
	)
	cmd := &cobra.Command{
		Use:     "delete --type TYPE [-p PROJECT | --department D]",
		Short:   "Delete the policy set at one scope",
		Example: "  runway policy delete --type training -p team-a",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			scope, err := s.policyScope(typ)
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if err := c.DeletePolicy(ctx, scope, typ); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "policy %q deleted\n", scope.PolicyName(typ))
				return nil
			})
		},
	}
	s.add(cmd)
	typeFlag(cmd, &typ)
	return cmd
}

func policyEffectiveCommand() *cobra.Command {
	var project, typ, output string
	cmd := &cobra.Command{
		Use:     "effective -p PROJECT --type TYPE",
		Short:   "Show the policy in force for a project: each default and rule with the policy it comes from",
		Example: "  runway policy effective -p team-a --type training",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needProject(project); err != nil {
				return err
			}
			if err := checkType(typ); err != nil {
				return err
			}
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				eff, err := c.EffectivePolicy(ctx, project, typ)
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if output != formatTable {
					return printMessages(w, output, false, eff)
				}
				t := newTable(w, "Field", "Default", "Default From", "Rule", "Rule From")
				for _, f := range eff.GetFields() {
					t.row(f.GetField(), orDefault(f.GetDefaultValue(), "-"), orDefault(f.GetDefaultSource(), "-"),
						orDefault(ruleText(f.GetRule()), "-"), orDefault(f.GetRuleSource(), "-"))
				}
				return t.flush()
			})
		},
	}
	projectFlag(cmd, &project)
	typeFlag(cmd, &typ)
	outputFlag(cmd, &output)
	return cmd
}

// ruleText is a rule on one line: "required, max 2, options a|b".
func ruleText(r *workloadv1.FieldRule) string {
	if r == nil {
		return ""
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var parts []string
	if r.Required != nil {
		parts = append(parts, "required "+strconv.FormatBool(r.GetRequired()))
	}
	if r.Min != nil {
		parts = append(parts, "min "+num(r.GetMin()))
	}
	if r.Max != nil {
		parts = append(parts, "max "+num(r.GetMax()))
	}
	if r.Step != nil {
		parts = append(parts, "step "+num(r.GetStep()))
	}
	if len(r.GetOptions()) > 0 {
		parts = append(parts, "options "+strings.Join(r.GetOptions(), "|"))
	}
	if r.CanEdit != nil {
		parts = append(parts, "canEdit "+strconv.FormatBool(r.GetCanEdit()))
	}
	return strings.Join(parts, ", ")
}
