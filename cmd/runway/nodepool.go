package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/sdk"
	"github.com/runwayhq/runway/pkg/toleration"
)

// nodePoolFlags are the settings `nodepool create` and `update` take.
type nodePoolFlags struct {
	labels      []string
	placement   string
	timeSlicing string
	lease       time.Duration
	precision   string
	description string
	halfLife    time.Duration
	k           float64
	tolerations []string
}

func (n *nodePoolFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVar(&n.labels, "label", nil, "node label KEY=VALUE a node must carry to join the pool (repeat)")
	f.StringVar(&n.placement, "placement", "", "binpack (fill nodes) or spread (balance them)")
	f.StringVar(&n.timeSlicing, "time-slicing", "", "how shared GPUs divide compute: off, strict or fair")
	f.DurationVar(&n.lease, "lease", 0, "time-slicing lease, such as 250ms")
	f.StringVar(&n.precision, "precision", "", "time-slicing precision, such as 5%")
	f.StringVar(&n.description, "description", "", "free text")
	f.DurationVar(&n.halfLife, "fairshare-half-life", 0, "time-based fair share: how fast past usage is forgotten, such as 1h (0 turns it off)")
	f.Float64Var(&n.k, "fairshare-k", 1, "time-based fair share: how strongly past usage moves the over-quota weights (0-10)")
	f.StringArrayVar(&n.tolerations, "toleration", nil, "Kubernetes taint KEY[=VALUE][:EFFECT] that Runway's pods in the pool tolerate (repeat; on update the list replaces the pool's, and --toleration '' clears it)")
}

// pool builds the node pool and the update mask of the flags given.
func (n *nodePoolFlags) pool(cmd *cobra.Command, name string) (*quotav1.NodePool, []string, error) {
	p := &quotav1.NodePool{Name: sdk.NodePoolName(name), Description: n.description}
	var mask []string
	changed := cmd.Flags().Changed
	if changed("description") {
		mask = append(mask, "description")
	}
	if changed("label") {
		p.NodeSelector = map[string]string{}
		for _, l := range n.labels {
			k, v, ok := strings.Cut(l, "=")
			if !ok || k == "" {
				return nil, nil, usageError("--label %q: want KEY=VALUE", l)
			}
			p.NodeSelector[k] = v
		}
		mask = append(mask, "node_selector")
	}
	if changed("placement") {
		v, ok := quotav1.PlacementStrategy_value["PLACEMENT_STRATEGY_"+strings.ToUpper(n.placement)]
		if !ok {
			return nil, nil, usageError("--placement %q: want binpack or spread", n.placement)
		}
		p.PlacementStrategy = quotav1.PlacementStrategy(v)
		mask = append(mask, "placement_strategy")
	}
	if changed("time-slicing") || changed("lease") || changed("precision") {
		ts := &quotav1.TimeSlicing{}
		if changed("time-slicing") {
			v, ok := quotav1.TimeSlicingMode_value["TIME_SLICING_MODE_"+strings.ToUpper(n.timeSlicing)]
			if !ok {
				return nil, nil, usageError("--time-slicing %q: want off, strict or fair", n.timeSlicing)
			}
			ts.Mode = quotav1.TimeSlicingMode(v)
			mask = append(mask, "time_slicing.mode")
		}
		if changed("lease") {
			ts.LeaseDuration = durationpb.New(n.lease)
			mask = append(mask, "time_slicing.lease_duration")
		}
		if changed("precision") {
			pc, err := strconv.Atoi(strings.TrimSuffix(n.precision, "%"))
			if err != nil {
				return nil, nil, usageError("--precision %q: want a percentage such as 5%%", n.precision)
			}
			ts.PrecisionPercent = int32(pc)
			mask = append(mask, "time_slicing.precision_percent")
		}
		p.TimeSlicing = ts
	}
	if changed("fairshare-half-life") || changed("fairshare-k") {
		tb := &quotav1.TimeBasedFairShare{}
		switch {
		case changed("fairshare-half-life") && n.halfLife == 0:
			if changed("fairshare-k") {
				return nil, nil, usageError("--fairshare-k: --fairshare-half-life 0 turns time-based fair share off")
			}
			tb = nil
			mask = append(mask, "time_based_fair_share")
		case changed("fairshare-half-life"):
			tb.HalfLife = durationpb.New(n.halfLife)
			mask = append(mask, "time_based_fair_share.half_life")
		}
		if changed("fairshare-k") {
			tb.K = &n.k
			mask = append(mask, "time_based_fair_share.k")
		}
		p.TimeBasedFairShare = tb
	}
	if changed("toleration") {
		for _, s := range n.tolerations {
			if s == "" && len(n.tolerations) == 1 {
				break // none
			}
			t, err := toleration.Parse(s)
			if err != nil {
				return nil, nil, usageError("--toleration: %v", err)
			}
			p.Tolerations = append(p.Tolerations, t)
		}
		mask = append(mask, "tolerations")
	}
	return p, mask, nil
}

func nodePoolCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "nodepool", Aliases: []string{"nodepools", "node-pool"}, Short: "Node pools: groups of nodes by label, with placement and GPU-sharing settings"}
	var cf, uf nodePoolFlags
	create := &cobra.Command{
		Use:   "create NAME [--label K=V] [--placement binpack|spread] [--time-slicing off|strict|fair] [--fairshare-half-life 1h] [--toleration KEY[=VALUE][:EFFECT]]",
		Short: "Create a node pool",
		Example: `  runway nodepool create a100 --label gpu=a100 --placement spread
  runway nodepool create h100 --label gpu=h100 --fairshare-half-life 1h --fairshare-k 0.5
  runway nodepool create ml --label pool=ml --toleration dedicated=ml:NoSchedule`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, _, err := cf.pool(cmd, args[0])
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if _, err := c.QuotaService.CreateNodePool(ctx, &quotav1.CreateNodePoolRequest{NodePoolId: args[0], NodePool: p}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node pool %q created\n", args[0])
				return nil
			})
		},
	}
	cf.add(create)
	update := &cobra.Command{
		Use:   "update NAME [--time-slicing off|strict|fair] [--lease 250ms] [--precision 5%] [--placement P] [--label K=V] [--fairshare-half-life 1h] [--fairshare-k 0.5] [--toleration KEY[=VALUE][:EFFECT]]",
		Short: "Change a node pool's settings (only the flags given)",
		Example: `  runway nodepool update default --time-slicing strict
  runway nodepool update default --time-slicing fair --lease 250ms --precision 5%
  runway nodepool update default --fairshare-half-life 1h --fairshare-k 0.5   # time-based fair share
  runway nodepool update default --fairshare-half-life 0                      # turn it off
  runway nodepool update default --toleration dedicated:NoSchedule --toleration gpu=h100
  runway nodepool update default --toleration ''                             # tolerate nothing more`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, mask, err := uf.pool(cmd, args[0])
			if err != nil {
				return err
			}
			if len(mask) == 0 {
				return usageError("nothing to change: give at least one setting")
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if _, err := c.QuotaService.UpdateNodePool(ctx, &quotav1.UpdateNodePoolRequest{NodePool: p,
					UpdateMask: &fieldmaskpb.FieldMask{Paths: mask}}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "node pool %q updated\n", args[0])
				return nil
			})
		},
	}
	uf.add(update)

	var output string
	var watch bool
	list := &cobra.Command{
		Use:     "list",
		Short:   "List node pools and their settings",
		Example: "  runway nodepool list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listLoop(cmd, output, watch, func(ctx context.Context, c *sdk.Client, w io.Writer) error {
				ps, err := sdk.Collect(c.NodePools(ctx))
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(w, output, true, ps...)
				}
				t := newTable(w, "Node Pool", "Labels", "Placement", "Time Slicing", "Time-Based Fair Share")
				for _, p := range ps {
					t.row(sdk.ID(p.GetName()), orDefault(selector(p.GetNodeSelector()), "-"),
						enumLabel(p.GetPlacementStrategy().String(), "PLACEMENT_STRATEGY_"), timeSlicing(p.GetTimeSlicing()),
						timeBased(p.GetTimeBasedFairShare()))
				}
				return t.flush()
			})
		},
	}
	outputFlag(list, &output)
	watchFlag(list, &watch)

	var getOutput string
	get := &cobra.Command{
		Use:     "get NAME",
		Short:   "Show a node pool's settings",
		Example: "  runway nodepool get default",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(getOutput); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				p, err := c.QuotaService.GetNodePool(ctx, &quotav1.GetNodePoolRequest{Name: sdk.NodePoolName(args[0])})
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if getOutput != formatTable {
					return printMessages(w, getOutput, false, p)
				}
				f := fields{w: w}
				f.add("Name", args[0])
				if p.GetDescription() != "" {
					f.add("Description", p.GetDescription())
				}
				f.add("Labels", orDefault(selector(p.GetNodeSelector()), "-"))
				f.add("Placement", enumLabel(p.GetPlacementStrategy().String(), "PLACEMENT_STRATEGY_"))
				f.add("Time slicing", timeSlicing(p.GetTimeSlicing()))
				f.add("Time-based fair share", timeBased(p.GetTimeBasedFairShare()))
				var ts []string
				for _, t := range p.GetTolerations() {
					ts = append(ts, toleration.String(t))
				}
				f.add("Tolerations", orDefault(strings.Join(ts, ", "), "-"))
				f.add("Created", formatTime(p.GetCreateTime().AsTime()))
				f.flush()
				return nil
			})
		},
	}
	outputFlag(get, &getOutput)

	del := deleteCommand("node pool", "Delete a node pool",
		func(ctx context.Context, c *sdk.Client, id string) error {
			_, err := c.QuotaService.DeleteNodePool(ctx, &quotav1.DeleteNodePoolRequest{Name: sdk.NodePoolName(id)})
			return err
		})
	cmd.AddCommand(create, update, get, list, del)
	return cmd
}

func selector(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

// timeSlicing prints a pool's setting: "off", "strict, lease 250ms, 5%".
func timeSlicing(ts *quotav1.TimeSlicing) string {
	mode := ts.GetMode()
	if mode == quotav1.TimeSlicingMode_TIME_SLICING_MODE_UNSPECIFIED || mode == quotav1.TimeSlicingMode_TIME_SLICING_MODE_OFF {
		return "off"
	}
	s := strings.ToLower(strings.TrimPrefix(mode.String(), "TIME_SLICING_MODE_"))
	if d := ts.GetLeaseDuration(); d != nil {
		s += ", lease " + d.AsDuration().String()
	}
	if p := ts.GetPrecisionPercent(); p > 0 {
		s += fmt.Sprintf(", precision %d%%", p)
	}
	return s
}

// timeBased prints a pool's time-based fair share: "off", "half-life 1h0m0s, k 0.5".
func timeBased(tb *quotav1.TimeBasedFairShare) string {
	if tb == nil {
		return "off"
	}
	return fmt.Sprintf("half-life %s, k %s", tb.GetHalfLife().AsDuration(), strconv.FormatFloat(tb.GetK(), 'f', -1, 64))
}
