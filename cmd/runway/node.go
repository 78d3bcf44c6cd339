package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	nodemanagerv1 "github.com/runwayhq/runway/gen/go/runway/nodemanager/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

func nodeCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "node", Aliases: []string{"nodes"}, Short: "Nodes: their GPUs, what runs on them, drain and undrain"}
	cmd.AddCommand(nodeListCommand(), nodeDescribeCommand(),
		nodeDrainCommand("drain", "Stop placing workloads on a node (with --evict, send its workloads back to pending)"),
		nodeDrainCommand("undrain", "Let the scheduler place workloads on a drained node again"), nodeRoleCommand())
	return cmd
}

func nodeListCommand() *cobra.Command {
	var output string
	var watch bool
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List nodes with their pool, state and GPUs",
		Example: "  runway node list\n  runway node list -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				ns, err := sdk.Collect(c.Nodes(ctx, ""))
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(w, output, true, ns...)
				}
				t := newTable(w, "Node", "Node Pool", "Status", "GPUs", "GPU Model", "GPU Alloc.", "Roles")
				for _, n := range ns {
					model := "-"
					if len(n.GetDevices()) > 0 {
						model = n.GetDevices()[0].GetModel()
					}
					t.row(sdk.ID(n.GetName()), sdk.ID(n.GetNodePool()), nodeState(n), fmt.Sprint(len(n.GetDevices())),
						model, formatGPUs(n.GetAllocated().GetMilliGpus()), roleNames(n.GetRoles()))
				}
				return t.flush()
			})
		},
	}
	outputFlag(cmd, &output)
	watchFlag(cmd, &watch)
	return cmd
}

func nodeState(n *nodemanagerv1.Node) string {
	s := enumLabel(n.GetReadiness().String(), "READINESS_")
	if n.GetReadiness() == nodemanagerv1.Readiness_READINESS_NOT_READY {
		s = "NotReady"
	}
	if n.GetDrained() {
		s += ",Drained"
	}
	return s
}

func nodeDescribeCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "describe NAME",
		Short:   "Show a node: labels, capacity, each GPU with what it holds, and the time-slicing plan",
		Example: "  runway node describe node-1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				n, err := c.GetNode(ctx, args[0])
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(cmd.OutOrStdout(), output, false, n)
				}
				return describeNode(cmd.OutOrStdout(), n)
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func describeNode(w io.Writer, n *nodemanagerv1.Node) error {
	f := fields{w: w}
	f.add("Name", sdk.ID(n.GetName()))
	f.add("Node pool", sdk.ID(n.GetNodePool()))
	f.add("Status", nodeState(n))
	if n.GetReadinessMessage() != "" {
		f.add("Status message", n.GetReadinessMessage())
	}
	if n.GetDrained() && n.GetDrainReason() != "" {
		f.add("Drain reason", n.GetDrainReason())
	}
	f.add("Labels", orDefault(selector(n.GetLabels()), "-"))
	f.add("Roles", roleNames(n.GetRoles()))
	c := n.GetCapacity()
	f.add("Capacity", fmt.Sprintf("%s GPUs, %g CPUs, %s memory", formatGPUs(c.GetMilliGpus()), float64(c.GetMilliCpu())/1000, formatBytes(c.GetMemoryBytes())))
	a := n.GetAllocated()
	f.add("Allocated", fmt.Sprintf("%s GPUs, %g CPUs, %s memory", formatGPUs(a.GetMilliGpus()), float64(a.GetMilliCpu())/1000, formatBytes(a.GetMemoryBytes())))
	if n.GetAgentVersion() != "" {
		f.add("Agent", n.GetAgentVersion())
	}
	f.flush()
	if len(n.GetDevices()) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nGPUs:")
	t := newIndentedTable(w, "Index", "Model", "Memory", "MIG", "Healthy", "Held By", "Share", "Memory Held")
	for _, d := range n.GetDevices() {
		row := []string{fmt.Sprint(d.GetIndex()), d.GetModel(), formatBytes(d.GetMemoryBytes()),
			enumLabel(d.GetMigMode().String(), "MIG_MODE_"), fmt.Sprint(d.GetHealthy())}
		if len(d.GetAllocations()) == 0 {
			t.row(append(row, "-", "-", "-")...)
		}
		for i, a := range d.GetAllocations() {
			if i > 0 {
				row = []string{"", "", "", "", ""}
			}
			t.row(append(row, fmt.Sprintf("%s/%s pod %d", sdk.ProjectOf(a.GetWorkload()), sdk.ID(a.GetWorkload()), a.GetPodIndex()),
				formatGPUs(int64(a.GetFractionMilli())), formatBytes(a.GetGpuMemoryBytes()))...)
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, d := range n.GetDevices() {
		plan := d.GetTimeSlicePlan()
		if len(plan.GetSlots()) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nTime-slicing plan of GPU %d (%s, lease %s, precision %d%%):\n", d.GetIndex(),
			enumLabel(plan.GetMode().String(), "TIME_SLICING_MODE_"), plan.GetLeaseDuration().AsDuration(), plan.GetPrecisionPercent())
		t := newIndentedTable(w, "Workload", "Pod", "Share", "Offset", "Duration")
		for _, s := range plan.GetSlots() {
			t.row(sdk.ProjectOf(s.GetWorkload())+"/"+sdk.ID(s.GetWorkload()), fmt.Sprint(s.GetPodIndex()), fmt.Sprintf("%d%%", s.GetSharePercent()),
				s.GetOffset().AsDuration().String(), s.GetDuration().AsDuration().String())
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}

func nodeDrainCommand(verb, short string) *cobra.Command {
	var (
		reason string
		evict  bool
	)
	cmd := &cobra.Command{
		Use:     verb + " NAME",
		Short:   short,
		Example: "  runway node " + verb + " node-1",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				var err error
				if verb == "drain" {
					_, err = c.NodeManagerService.DrainNode(ctx, &nodemanagerv1.DrainNodeRequest{Name: sdk.NodeName(args[0]), Reason: reason, EvictWorkloads: evict})
				} else {
					_, err = c.NodeManagerService.UndrainNode(ctx, &nodemanagerv1.UndrainNodeRequest{Name: sdk.NodeName(args[0])})
				}
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node %q %sed\n", args[0], verb)
				return nil
			})
		},
	}
	if verb == "drain" {
		cmd.Flags().StringVar(&reason, "reason", "", "why, for other admins")
		cmd.Flags().BoolVar(&evict, "evict", false, "also send the node's workloads back to pending")
	}
	return cmd
}
