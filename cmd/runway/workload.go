package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	workloadv1 "github.com/runwayhq/runway/gen/go/runway/workload/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

func workloadCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "workload", Aliases: []string{"workloads"}, Short: "List, describe and manage workloads of every kind"}
	cmd.AddCommand(workloadListCommand("workload", ""), workloadDescribeCommand(), workloadLogsCommand(), workloadMetricsCommand(),
		workloadActionCommand("delete", "Delete a workload: its pods are stopped and it is removed",
			func(ctx context.Context, c *sdk.Client, p, w string) error { return c.DeleteWorkload(ctx, p, w) }, "deleted"),
		workloadActionCommand("suspend", "Suspend a workload: it releases its GPUs and stays Stopped until resumed",
			func(ctx context.Context, c *sdk.Client, p, w string) error {
				_, err := c.SuspendWorkload(ctx, p, w)
				return err
			}, "suspended"),
		workloadActionCommand("resume", "Resume a suspended workload: it goes back to Pending",
			func(ctx context.Context, c *sdk.Client, p, w string) error {
				_, err := c.ResumeWorkload(ctx, p, w)
				return err
			}, "resumed"),
		workloadSetPriorityCommand())
	return cmd
}

// workloadListCommand lists workloads; kind and filter narrow it to one
// type (`runway training list`).
func workloadListCommand(kind, filter string) *cobra.Command {
	var (
		project, output, selector string
		all, watch                bool
	)
	cmd := &cobra.Command{
		Use:   "list [-A | -p PROJECT] [-l KEY=VALUE,...]",
		Short: "List " + strings.TrimPrefix(kind+" workloads", "workload ") + ": running first, then pending, stopped and finished",
		Example: fmt.Sprintf(`  runway %[1]s list -A
  runway %[1]s list -p team-a -o json
  runway %[1]s list -A --watch
  runway %[1]s list -A -l team=vision,stage!=test`, kind),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			filter, err := withSelector(filter, selector)
			if err != nil {
				return err
			}
			switch {
			case all && project != "":
				return usageError("-A and -p are exclusive")
			case all:
				project = sdk.AllProjects
			case project == "":
				return usageError("say which project (-p PROJECT) or all of them (-A)")
			}
			c, err := connect(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if watch {
				return watchWorkloads(cmd.Context(), cmd.OutOrStdout(), c, project, filter, output)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), callTimeout)
			defer cancel()
			ws, err := sdk.Collect(c.Workloads(ctx, project, filter))
			if err != nil {
				return err
			}
			return printWorkloads(cmd.OutOrStdout(), output, ws)
		},
	}
	projectFlag(cmd, &project)
	cmd.Flags().BoolVarP(&all, "all-projects", "A", false, "every project you may see")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "print the list again whenever a workload changes")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only workloads with these labels: KEY=VALUE or KEY!=VALUE, comma-separated")
	outputFlag(cmd, &output)
	return cmd
}

// withSelector adds a label selector ("team=vision,stage!=test") to an
// AIP-160 filter as labels.KEY comparisons.
func withSelector(filter, selector string) (string, error) {
	if selector == "" {
		return filter, nil
	}
	parts := []string{}
	if filter != "" {
		parts = append(parts, filter)
	}
	for _, term := range strings.Split(selector, ",") {
		op := "="
		k, v, ok := strings.Cut(term, "!=")
		if ok {
			op = "!="
		} else if k, v, ok = strings.Cut(term, "="); !ok {
			return "", usageError("-l %q: want KEY=VALUE or KEY!=VALUE, comma-separated", term)
		}
		k = strings.TrimSpace(k)
		if k == "" || strings.ContainsAny(k, " \t\"") {
			return "", usageError("-l %q: a label key without spaces or quotes", term)
		}
		parts = append(parts, fmt.Sprintf("labels.%s %s %q", k, op, strings.TrimSpace(v)))
	}
	return strings.Join(parts, " AND "), nil
}

// watchWorkloads prints the list once the initial listing is in, then again
// after every burst of changes, until interrupted.
func watchWorkloads(ctx context.Context, w io.Writer, c *sdk.Client, project, filter, output string) error {
	stream, err := c.WatchWorkloads(ctx, project, filter)
	if err != nil {
		return err
	}
	current := map[string]*workloadv1.Workload{}
	synced := false
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal end of a watch
			}
			return err
		}
		switch ev.GetType() {
		case workloadv1.WatchEventType_WATCH_EVENT_TYPE_DELETED:
			delete(current, ev.GetWorkload().GetName())
		case workloadv1.WatchEventType_WATCH_EVENT_TYPE_SYNCED:
			synced = true
		default:
			current[ev.GetWorkload().GetName()] = ev.GetWorkload()
		}
		if !synced {
			continue
		}
		if output == formatTable {
			fmt.Fprintf(w, "\n%s\n", time.Now().Format(time.TimeOnly))
		}
		if err := printWorkloads(w, output, slices.Collect(maps.Values(current))); err != nil {
			return err
		}
	}
}

// phaseOrder sorts the list as the runai CLI does: what holds GPUs first.
var phaseOrder = map[workloadv1.WorkloadPhase]int{
	workloadv1.WorkloadPhase_WORKLOAD_PHASE_RUNNING:   0,
	workloadv1.WorkloadPhase_WORKLOAD_PHASE_PENDING:   1,
	workloadv1.WorkloadPhase_WORKLOAD_PHASE_STOPPED:   2,
	workloadv1.WorkloadPhase_WORKLOAD_PHASE_FAILED:    3,
	workloadv1.WorkloadPhase_WORKLOAD_PHASE_COMPLETED: 4,
}

func printWorkloads(w io.Writer, output string, ws []*workloadv1.Workload) error {
	slices.SortStableFunc(ws, func(a, b *workloadv1.Workload) int {
		return cmp.Or(cmp.Compare(phaseOrder[a.GetStatus().GetPhase()], phaseOrder[b.GetStatus().GetPhase()]),
			strings.Compare(a.GetName(), b.GetName()))
	})
	if output != formatTable {
		return printMessages(w, output, true, ws...)
	}
	t := newTable(w, "Workload", "Type", "Status", "Project", "Running/Req.Pods", "GPU Alloc.")
	for _, wl := range ws {
		st := wl.GetStatus()
		t.row(sdk.ID(wl.GetName()), kindLabel(wl.GetType()), phaseLabel(st.GetPhase()), sdk.ID(wl.GetProject()),
			fmt.Sprintf("%d/%d", st.GetRunningPods(), st.GetRequestedPods()), formatGPUs(gpuAlloc(wl)))
	}
	return t.flush()
}

// gpuAlloc is the "GPU Alloc." column: the GPUs a placed workload holds,
// and for one that holds nothing (pending, preempted) the GPUs it asks for,
// as the runai CLI shows them. A GPU-memory request that is not placed has
// no GPU count yet and shows 0.
func gpuAlloc(w *workloadv1.Workload) int64 {
	if a := w.GetStatus().GetAllocatedMilliGpus(); a > 0 {
		return a
	}
	pods := int64(max(w.GetStatus().GetRequestedPods(), w.GetSpec().GetPods(), 1))
	switch g := w.GetSpec().GetGpu(); {
	case g.GetDevices() > 0:
		return int64(g.GetDevices()) * 1000 * pods
	case g.GetFractionMilli() > 0:
		return int64(g.GetFractionMilli()) * pods
	}
	return 0
}

// kindLabel and phaseLabel print enums as people say them: "Training", "Pending".
func kindLabel(t workloadv1.WorkloadType) string {
	return enumLabel(t.String(), "WORKLOAD_TYPE_")
}

func phaseLabel(p workloadv1.WorkloadPhase) string { return enumLabel(p.String(), "WORKLOAD_PHASE_") }

func enumLabel(s, prefix string) string {
	words := strings.Split(strings.ToLower(strings.TrimPrefix(s, prefix)), "_")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}

func workloadActionCommand(verb, short string, do func(context.Context, *sdk.Client, string, string) error, done string) *cobra.Command {
	var project string
	cmd := &cobra.Command{
		Use:     verb + " NAME -p PROJECT",
		Short:   short,
		Example: "  runway workload " + verb + " a1 -p team-a",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needProject(project); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if err := do(ctx, c, project, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "workload %q in project %s %s\n", args[0], project, done)
				return nil
			})
		},
	}
	projectFlag(cmd, &project)
	workloadArg(cmd)
	return cmd
}

func workloadLogsCommand() *cobra.Command {
	var (
		project string
		pod     int32
		tail    int32
		follow  bool
	)
	cmd := &cobra.Command{
		Use:   "logs NAME -p PROJECT [-f] [--pod N] [--tail N]",
		Short: "Print a workload pod's output (stdout and stderr)",
		Example: `  runway workload logs a1 -p team-a
  runway workload logs a1 -p team-a -f --tail 20`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needProject(project); err != nil {
				return err
			}
			c, err := connect(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			stream, err := c.WorkloadService.ReadWorkloadLogs(cmd.Context(), &workloadv1.ReadWorkloadLogsRequest{
				Name: sdk.WorkloadName(project, args[0]), PodIndex: pod, Follow: follow, TailLines: tail})
			if err != nil {
				return err
			}
			for {
				msg, err := stream.Recv()
				if err == io.EOF || (err != nil && cmd.Context().Err() != nil) {
					return nil
				}
				if err != nil {
					return err
				}
				if _, err := cmd.OutOrStdout().Write(msg.GetData()); err != nil {
					return err
				}
			}
		},
	}
	projectFlag(cmd, &project)
	workloadArg(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing output as the pod writes it, until it ends")
	cmd.Flags().Int32Var(&pod, "pod", 0, "the pod's index (0: the first, the master of a distributed training)")
	cmd.Flags().Int32Var(&tail, "tail", 0, "start this many lines before the end (0: everything)")
	return cmd
}
