package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	commonv1 "github.com/runwayhq/runway/gen/go/runway/common/v1"
	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	schedulerv1 "github.com/runwayhq/runway/gen/go/runway/scheduler/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// quotaFlags set one node pool's GPU quota of a project or department.
type quotaFlags struct {
	gpu, limit  string
	pool        string
	weight      int32
	noOverQuota bool
}

func (q *quotaFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&q.gpu, "gpu", "", "guaranteed (deserved) GPUs in the node pool, such as 2 or 0.5")
	f.StringVar(&q.pool, "node-pool", "default", "the node pool the quota is for")
	f.Int32Var(&q.weight, "over-quota-weight", 1, "share of idle GPUs beyond quota, relative to siblings (0: none)")
	f.StringVar(&q.limit, "limit", "", "most GPUs it may hold in the node pool (default: no limit)")
	f.BoolVar(&q.noOverQuota, "no-over-quota", false, "never hold more than the guaranteed GPUs")
}

// quota is the NodePoolQuota the flags describe.
func (q *quotaFlags) quota(cmd *cobra.Command) (*quotav1.NodePoolQuota, error) {
	g := &quotav1.GpuQuota{}
	if q.gpu != "" {
		m, err := milliGPUs(q.gpu)
		if err != nil {
			return nil, usageError("--gpu: %v", err)
		}
		g.DeservedMilliGpus = proto.Int64(m)
	}
	if q.limit != "" {
		m, err := milliGPUs(q.limit)
		if err != nil {
			return nil, usageError("--limit: %v", err)
		}
		g.LimitMilliGpus = proto.Int64(m)
	}
	if cmd.Flags().Changed("over-quota-weight") {
		g.OverQuotaWeight = proto.Int32(q.weight)
	}
	if q.noOverQuota {
		g.OverQuotaEnabled = proto.Bool(false)
	}
	return &quotav1.NodePoolQuota{NodePool: sdk.NodePoolName(q.pool), Gpu: g}, nil
}

// milliGPUs reads a GPU amount ("2", "0.5", "-1" for unlimited).
func milliGPUs(s string) (int64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || (f < 0 && f != -1) || f > 1e9 {
		return 0, fmt.Errorf("bad GPU amount %q: want a number of GPUs such as 2 or 0.5 (-1: unlimited)", s)
	}
	if f == -1 {
		return -1, nil
	}
	return int64(f*1000 + 0.5), nil
}

func projectCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "project", Aliases: []string{"projects"}, Short: "Projects: quotas per node pool, fair share and allocation"}
	cmd.AddCommand(projectCreateCommand(), projectListCommand(), projectDescribeCommand(), deleteCommand("project", "Delete a project that has no workloads",
		func(ctx context.Context, c *sdk.Client, id string) error { return c.DeleteProject(ctx, id) }), rulesCommand(projectRules))
	return cmd
}

func projectCreateCommand() *cobra.Command {
	var (
		q          quotaFlags
		department string
	)
	cmd := &cobra.Command{
		Use:   "create NAME [--gpu N] [--department D] [--node-pool P] [--over-quota-weight W] [--limit N] [--no-over-quota]",
		Short: "Create a project with a GPU quota in one node pool",
		Example: `  runway project create team-a --gpu 2
  runway project create team-c --gpu 4 --department research --node-pool a100 --limit 6`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			quota, err := q.quota(cmd)
			if err != nil {
				return err
			}
			p := &quotav1.Project{NodePoolQuotas: []*quotav1.NodePoolQuota{quota}}
			if department != "" {
				p.Department = sdk.DepartmentName(department)
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if _, err := c.CreateProject(ctx, args[0], p); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "project %q created\n", args[0])
				return nil
			})
		},
	}
	q.add(cmd)
	cmd.Flags().StringVar(&department, "department", "", "the department (default: default)")
	return cmd
}

func projectListCommand() *cobra.Command {
	var output string
	var watch bool
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List projects with their quota, allocation and fair share per node pool",
		Example: "  runway project list\n  runway project list -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				ps, err := sdk.Collect(c.Projects(ctx))
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(w, output, true, ps...)
				}
				queues, err := queuesByName(ctx, c)
				if err != nil {
					return err
				}
				t := newTable(w, "Project", "Department", "Node Pool", "GPU Quota", "Limit", "Weight", "Allocated", "Fair Share")
				for _, p := range ps {
					queueRows(t, sdk.ID(p.GetName()), sdk.ID(p.GetDepartment()), p.GetNodePoolQuotas(), queues[p.GetName()+"/queue"])
				}
				return t.flush()
			})
		},
	}
	outputFlag(cmd, &output)
	watchFlag(cmd, &watch)
	return cmd
}

// queuesByName reads every scheduler queue. A scheduler that is not served
// at this address or not reachable (it runs on its own in a cluster) leaves
// the allocation columns "-" rather than failing the list of quotas.
func queuesByName(ctx context.Context, c *sdk.Client) (map[string]*schedulerv1.Queue, error) {
	qs, err := sdk.Collect(c.Queues(ctx, ""))
	if err != nil && sdk.Code(err) != codes.Unimplemented && sdk.Code(err) != codes.Unavailable {
		return nil, err
	}
	m := map[string]*schedulerv1.Queue{}
	for _, q := range qs {
		m[q.GetName()] = q
	}
	return m, nil
}

// queueRows adds one row per node pool of a queue: what is configured, and
// what the scheduler last computed for it.
func queueRows(t *table, name, parent string, quotas []*quotav1.NodePoolQuota, q *schedulerv1.Queue) {
	pools := map[string]*schedulerv1.QueueNodePool{}
	for _, p := range q.GetNodePools() {
		pools[p.GetNodePool()] = p
	}
	seen := map[string]bool{}
	row := func(pool string, np *quotav1.NodePoolQuota, s *schedulerv1.QueueNodePool) {
		g := np.GetGpu()
		if g == nil { // a pool the queue's quotas do not name
			g = &quotav1.GpuQuota{}
		}
		deserved, limit, weight := "0.00", "-", "1"
		if g.DeservedMilliGpus != nil {
			deserved = gpuAmount(g.GetDeservedMilliGpus())
		}
		if g.LimitMilliGpus != nil {
			limit = gpuAmount(g.GetLimitMilliGpus())
		}
		if g.OverQuotaWeight != nil {
			weight = strconv.Itoa(int(g.GetOverQuotaWeight()))
		}
		if g.OverQuotaEnabled != nil && !g.GetOverQuotaEnabled() {
			weight = "off"
		}
		t.row(name, orDefault(parent, "-"), sdk.ID(pool), deserved, limit, weight,
			quantityGPUs(s.GetAllocated()), quantityGPUs(s.GetFairShare()))
	}
	for _, np := range quotas {
		seen[np.GetNodePool()] = true
		row(np.GetNodePool(), np, pools[np.GetNodePool()])
	}
	for _, p := range q.GetNodePools() {
		if !seen[p.GetNodePool()] {
			row(p.GetNodePool(), nil, p)
		}
	}
	if len(quotas) == 0 && len(pools) == 0 {
		row("nodepools/default", nil, nil)
	}
}

// timeBasedRows explains the GPU over-quota weight in each node pool with
// time-based fair share: the decayed usage, u, s and w' (SCHEDULING.md §2).
// Nothing is printed where no pool has it.
func timeBasedRows(w io.Writer, q *schedulerv1.Queue) error {
	var t *table
	for _, np := range q.GetNodePools() {
		tb := np.GetTimeBasedFairShare()
		if tb == nil {
			continue
		}
		if t == nil {
			fmt.Fprintln(w, "\nTime-based fair share (GPUs):")
			t = newIndentedTable(w, "Node Pool", "Usage (GPU-hours, decayed)", "Usage Share (u)", "Weight Share (s)", "Adjusted Weight (w')")
		}
		t.row(sdk.ID(np.GetNodePool()), strconv.FormatFloat(tb.GetUsage().GetGpu()/3600, 'f', 2, 64),
			share(tb.GetUsageShare().GetGpu()), share(tb.GetWeightShare().GetGpu()), share(tb.GetAdjustedWeight().GetGpu()))
	}
	if t == nil {
		return nil
	}
	return t.flush()
}

func share(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

func gpuAmount(m int64) string {
	if m < 0 {
		return "unlimited"
	}
	return formatGPUs(m)
}

func quantityGPUs(q *commonv1.ResourceQuantity) string {
	if q == nil {
		return "-"
	}
	return formatGPUs(q.GetMilliGpus())
}

func projectDescribeCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "describe NAME",
		Short:   "Show a project: department, quotas, allocation and fair share per node pool",
		Example: "  runway project describe team-a",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				p, err := c.GetProject(ctx, args[0])
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if output != formatTable {
					return printMessages(w, output, false, p)
				}
				f := fields{w: w}
				f.add("Name", args[0])
				f.add("Department", sdk.ID(p.GetDepartment()))
				f.add("Default node pools", orDefault(strings.Join(ids(p.GetDefaultNodePools()), ", "), "default"))
				if p.GetDescription() != "" {
					f.add("Description", p.GetDescription())
				}
				f.add("Created", formatTime(p.GetCreateTime().AsTime()))
				f.flush()
				queues, err := queuesByName(ctx, c)
				if err != nil {
					return err
				}
				fmt.Fprintln(w, "\nQuota per node pool:")
				t := newIndentedTable(w, "Project", "Department", "Node Pool", "GPU Quota", "Limit", "Weight", "Allocated", "Fair Share")
				queueRows(t, args[0], sdk.ID(p.GetDepartment()), p.GetNodePoolQuotas(), queues[p.GetName()+"/queue"])
				if err := t.flush(); err != nil {
					return err
				}
				if err := timeBasedRows(w, queues[p.GetName()+"/queue"]); err != nil {
					return err
				}
				d, err := c.GetDepartment(ctx, sdk.ID(p.GetDepartment()))
				if err != nil {
					return err
				}
				return printRulesInForce(w, p, d)
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}
