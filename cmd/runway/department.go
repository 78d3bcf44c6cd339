package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

func departmentCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "department", Aliases: []string{"departments"}, Short: "Departments: groups of projects with a quota of their own"}
	var q quotaFlags
	create := &cobra.Command{
		Use:     "create NAME [--gpu N] [--node-pool P] [--over-quota-weight W] [--limit N] [--no-over-quota]",
		Short:   "Create a department with a GPU quota in one node pool",
		Example: "  runway department create research --gpu 8",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			quota, err := q.quota(cmd)
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				_, err := c.QuotaService.CreateDepartment(ctx, &quotav1.CreateDepartmentRequest{DepartmentId: args[0],
					Department: &quotav1.Department{NodePoolQuotas: []*quotav1.NodePoolQuota{quota}}})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "department %q created\n", args[0])
				return nil
			})
		},
	}
	q.add(create)

	var output string
	var watch bool
	list := &cobra.Command{
		Use:     "list",
		Short:   "List departments with their quota, allocation and fair share per node pool",
		Example: "  runway department list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				ds, err := sdk.Collect(c.Departments(ctx))
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(w, output, true, ds...)
				}
				queues, err := queuesByName(ctx, c)
				if err != nil {
					return err
				}
				t := newTable(w, "Department", "Account", "Node Pool", "GPU Quota", "Limit", "Weight", "Allocated", "Fair Share")
				for _, d := range ds {
					queueRows(t, sdk.ID(d.GetName()), "", d.GetNodePoolQuotas(), queues[d.GetName()+"/queue"])
				}
				return t.flush()
			})
		},
	}
	outputFlag(list, &output)
	watchFlag(list, &watch)

	del := deleteCommand("department", "Delete a department that has no projects",
		func(ctx context.Context, c *sdk.Client, id string) error {
			_, err := c.QuotaService.DeleteDepartment(ctx, &quotav1.DeleteDepartmentRequest{Name: sdk.DepartmentName(id)})
			return err
		})
	cmd.AddCommand(create, list, del, rulesCommand(departmentRules))
	return cmd
}
