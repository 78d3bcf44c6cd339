package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// Scheduling rules live on projects and departments (QuotaService), one
// entry per workload type; these commands read the entries, change the one
// for --type and write them back.

// rulesAccess reads and writes the rules of one project or department.
type rulesAccess struct {
	kind string // "project" or "department"
	get  func(ctx context.Context, c *sdk.Client, id string) ([]*quotav1.SchedulingRules, error)
	set  func(ctx context.Context, c *sdk.Client, id string, rules []*quotav1.SchedulingRules) error
}

var (
	projectRules = rulesAccess{kind: "project",
		get: func(ctx context.Context, c *sdk.Client, id string) ([]*quotav1.SchedulingRules, error) {
			p, err := c.GetProject(ctx, id)
			return p.GetSchedulingRules(), err
		},
		set: func(ctx context.Context, c *sdk.Client, id string, rules []*quotav1.SchedulingRules) error {
			_, err := c.SetProjectSchedulingRules(ctx, id, rules)
			return err
		}}
	departmentRules = rulesAccess{kind: "department",
		get: func(ctx context.Context, c *sdk.Client, id string) ([]*quotav1.SchedulingRules, error) {
			d, err := c.GetDepartment(ctx, id)
			return d.GetSchedulingRules(), err
		},
		set: func(ctx context.Context, c *sdk.Client, id string, rules []*quotav1.SchedulingRules) error {
			_, err := c.SetDepartmentSchedulingRules(ctx, id, rules)
			return err
		}}
)

var workloadTypes = map[string]workloadv1.WorkloadType{
	"workspace": workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE,
	"training":  workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING,
	"inference": workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE,
}

// rulesCommand is `runway project rules` or `runway department rules`.
func rulesCommand(a rulesAccess) *cobra.Command {
	cmd := &cobra.Command{Use: "rules", Short: "Scheduling rules of a " + a.kind + ": time limit, idle-GPU limit, node types, per workload type"}
	var (
		typ         string
		timeLimit   time.Duration
		idleLimit   time.Duration
		preemptIdle bool
		nodeTypes   []string
		pTimeLimit  time.Duration
		pIdleLimit  time.Duration
	)
	set := &cobra.Command{
		Use:   "set NAME --type TYPE [--time-limit D] [--idle-gpu-limit D [--preempt-when-idle]] [--preemptible-time-limit D] [--preemptible-idle-gpu-limit D] [--node-type T ...]",
		Short: "Set the scheduling rules of one workload type (replacing that type's rules)",
		Long: `Set the rules of one workload type. They apply to workloads submitted afterwards.
A project's rules for a type replace its department's for that type.

  --time-limit      stop a workload once it has run this long in total
                    (time pending or preempted does not count)
  --idle-gpu-limit  stop a workload whose GPUs have been idle this long
  --preempt-when-idle  with --idle-gpu-limit: preempt a preemptible workload
                    back to pending instead of stopping it
  --preemptible-time-limit, --preemptible-idle-gpu-limit
                    workspaces only: the limits of preemptible workspaces
                    (interactive-preemptible), when they differ from the
                    non-preemptible ones' (--time-limit, --idle-gpu-limit)
  --node-type       submissions must choose one of these node types`,
		Example: "  runway " + a.kind + " rules set team-a --type training --time-limit 8h --node-type dgx\n" +
			"  runway " + a.kind + " rules set team-a --type workspace --idle-gpu-limit 30m\n" +
			"  runway " + a.kind + " rules set team-a --type workspace --time-limit 24h --preemptible-time-limit 4h",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, ok := workloadTypes[typ]
			if !ok {
				return checkType(typ)
			}
			r := &quotav1.SchedulingRules{WorkloadType: t, PreemptWhenIdle: preemptIdle, NodeTypes: nodeTypes}
			if cmd.Flags().Changed("time-limit") {
				r.TimeLimit = durationpb.New(timeLimit)
			}
			if cmd.Flags().Changed("idle-gpu-limit") {
				r.IdleGpuLimit = durationpb.New(idleLimit)
			}
			if cmd.Flags().Changed("preemptible-time-limit") {
				r.PreemptibleTimeLimit = durationpb.New(pTimeLimit)
			}
			if cmd.Flags().Changed("preemptible-idle-gpu-limit") {
				r.PreemptibleIdleGpuLimit = durationpb.New(pIdleLimit)
			}
			return a.change(cmd, args[0], t, r)
		},
	}
	set.Flags().StringVar(&typ, "type", "", "the workload type: workspace, training or inference (required)")
	_ = set.MarkFlagRequired("type")
	set.Flags().DurationVar(&timeLimit, "time-limit", 0, "most total running time, such as 8h")
	set.Flags().DurationVar(&idleLimit, "idle-gpu-limit", 0, "most GPU idle time, such as 30m")
	set.Flags().DurationVar(&pTimeLimit, "preemptible-time-limit", 0, "workspaces: most total running time of a preemptible one")
	set.Flags().DurationVar(&pIdleLimit, "preemptible-idle-gpu-limit", 0, "workspaces: most GPU idle time of a preemptible one")
	set.Flags().BoolVar(&preemptIdle, "preempt-when-idle", false, "preempt (not stop) preemptible workloads at the idle-GPU limit")
	set.Flags().StringSliceVar(&nodeTypes, "node-type", nil, "allowed node types (run.ai/type values; repeat or comma-separate)")

	var delType string
	del := &cobra.Command{
		Use:     "delete NAME --type TYPE",
		Short:   "Remove the scheduling rules of one workload type",
		Example: "  runway " + a.kind + " rules delete team-a --type training",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, ok := workloadTypes[delType]
			if !ok {
				return checkType(delType)
			}
			return a.change(cmd, args[0], t, nil)
		},
	}
	del.Flags().StringVar(&delType, "type", "", "the workload type: workspace, training or inference (required)")
	_ = del.MarkFlagRequired("type")
	cmd.AddCommand(set, del)
	return cmd
}

// change replaces (r != nil) or removes the entry for t.
func (a rulesAccess) change(cmd *cobra.Command, id string, t workloadv1.WorkloadType, r *quotav1.SchedulingRules) error {
	return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
		rules, err := a.get(ctx, c, id)
		if err != nil {
			return err
		}
		var out []*quotav1.SchedulingRules
		for _, old := range rules {
			if old.GetWorkloadType() != t {
				out = append(out, old)
			}
		}
		if r != nil {
			out = append(out, r)
		}
		if err := a.set(ctx, c, id, out); err != nil {
			return err
		}
		verb := "set"
		if r == nil {
			verb = "removed"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s %q: %s rules %s\n", a.kind, id, typeName(t), verb)
		return nil
	})
}

func typeName(t workloadv1.WorkloadType) string {
	return strings.ToLower(enumLabel(t.String(), "WORKLOAD_TYPE_"))
}

// printRulesInForce prints, per workload type, the rules a project's new
// workloads get: the project's own entry, else its department's.
func printRulesInForce(w io.Writer, p *quotav1.Project, d *quotav1.Department) error {
	fmt.Fprintln(w, "\nScheduling rules in force:")
	t := newIndentedTable(w, "Type", "Time Limit", "Idle GPU Limit", "Node Types", "From", "Set By")
	n := 0
	for _, typ := range []workloadv1.WorkloadType{workloadv1.WorkloadType_WORKLOAD_TYPE_WORKSPACE,
		workloadv1.WorkloadType_WORKLOAD_TYPE_TRAINING, workloadv1.WorkloadType_WORKLOAD_TYPE_INFERENCE} {
		r, from := ruleFor(p.GetSchedulingRules(), typ), p.GetName()
		if r == nil {
			r, from = ruleFor(d.GetSchedulingRules(), typ), d.GetName()
		}
		if r == nil {
			continue
		}
		n++
		idle := withPreemptible(r.GetIdleGpuLimit(), r.GetPreemptibleIdleGpuLimit())
		if r.GetPreemptWhenIdle() && idle != "-" {
			idle += " (preempt)"
		}
		t.row(typeName(typ), withPreemptible(r.GetTimeLimit(), r.GetPreemptibleTimeLimit()), idle, orDefault(strings.Join(r.GetNodeTypes(), ","), "-"), from,
			orDefault(r.GetSetBy(), "account"))
	}
	if n == 0 {
		fmt.Fprintln(w, "  none")
		return nil
	}
	return t.flush()
}

func ruleFor(rules []*quotav1.SchedulingRules, t workloadv1.WorkloadType) *quotav1.SchedulingRules {
	for _, r := range rules {
		if r.GetWorkloadType() == t {
			return r
		}
	}
	return nil
}

// withPreemptible is a limit with its preemptible workspaces' own, when
// the rule sets one: "24h, preemptible 4h".
func withPreemptible(d, preemptible *durationpb.Duration) string {
	if preemptible == nil {
		return durationText(d)
	}
	return durationText(d) + ", preemptible " + durationText(preemptible)
}

func durationText(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return d.AsDuration().String()
}
