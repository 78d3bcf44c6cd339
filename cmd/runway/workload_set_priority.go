package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/runwayhq/runway/pkg/sdk"
)

// workloadSetPriorityCommand is `runway workload set-priority NAME CLASS`.
func workloadSetPriorityCommand() *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:   "set-priority NAME CLASS -p PROJECT",
		Short: "Change a workload's priority class; the scheduler acts on it in its next cycle",
		Long: `Change a workload's priority class: inference, build, interactive-preemptible
or train, among those its type may have (a training stays preemptible). The
scheduler orders, places and preempts it by the new class from its next cycle.
Needs the right to edit the workload; the change is audited.`,
		Example: "  runway workload set-priority a1 interactive-preemptible -p team-a",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needProject(project); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				w, err := c.SetWorkloadPriority(ctx, project, args[0], args[1])
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "workload %q in project %s has priority %s\n", args[0], project, w.GetSpec().GetPriority())
				return nil
			})
		},
	}
	projectFlag(cmd, &project)
	workloadArg(cmd)
	return cmd
}
