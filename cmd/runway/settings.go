package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	quotav1 "github.com/runwayhq/runway/gen/go/runway/quota/v1"
	"github.com/runwayhq/runway/pkg/sdk"
)

// setting is one KEY of `runway settings set KEY=VALUE`: the Settings field
// it writes and how its value is read ("" resets the field to its default).
type setting struct {
	key, field, help string
	parse            func(st *quotav1.Settings, value string) error
}

var settingKeys = []setting{
	{"reject-over-subscription", "reject_over_subscription", "true|false: refuse quotas that add up to more than their parent has",
		boolSetting(func(st *quotav1.Settings, v bool) { st.RejectOverSubscription = v })},
	{"default-node-pool", "default_node_pool", "NODE_POOL: the default node pool of new projects",
		func(st *quotav1.Settings, v string) error {
			if v != "" {
				st.DefaultNodePool = sdk.NodePoolName(v)
			}
			return nil
		}},
	{"allow-over-quota", "allow_over_quota_by_default", "true|false: workspaces with no priority may run over quota (interactive-preemptible)",
		boolSetting(func(st *quotav1.Settings, v bool) { st.AllowOverQuotaByDefault = v })},
	{"workspace-auto-suspend", "workspace_auto_suspend", "DURATION (8h) or off: suspend workspaces after this running time when no rule limits them",
		func(st *quotav1.Settings, v string) error {
			if v == "" || v == "off" {
				return nil
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				return usageError("workspace-auto-suspend: %q is not a duration such as 8h", v)
			}
			st.WorkspaceAutoSuspend = durationpb.New(d)
			return nil
		}},
	{"gpu-resource-optimization", "gpu_resource_optimization", "true|false: allow GPU fractions and GPU memory requests",
		boolSetting(func(st *quotav1.Settings, v bool) { st.GpuResourceOptimization = proto.Bool(v) })},
	{"login-banner", "login_banner", "TEXT: shown on the sign-in page (\\n for a new line)",
		func(st *quotav1.Settings, v string) error {
			st.LoginBanner = strings.ReplaceAll(v, `\n`, "\n")
			return nil
		}},
}

func boolSetting(set func(*quotav1.Settings, bool)) func(*quotav1.Settings, string) error {
	return func(st *quotav1.Settings, v string) error {
		if v == "" {
			return nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return usageError("%q is not true or false", v)
		}
		set(st, b)
		return nil
	}
}

// parseSettings turns KEY=VALUE arguments into the settings to send and
// their update mask.
func parseSettings(args []string) (*quotav1.Settings, []string, error) {
	st := &quotav1.Settings{Name: "settings"}
	var mask []string
	for _, arg := range args {
		key, value, ok := strings.Cut(arg, "=")
		i := slices.IndexFunc(settingKeys, func(s setting) bool { return s.key == key })
		if !ok || i < 0 {
			return nil, nil, usageError("%q: want KEY=VALUE with KEY one of %s", arg, strings.Join(settingKeyNames(), ", "))
		}
		if err := settingKeys[i].parse(st, value); err != nil {
			return nil, nil, err
		}
		if !slices.Contains(mask, settingKeys[i].field) {
			mask = append(mask, settingKeys[i].field)
		}
	}
	return st, mask, nil
}

func settingKeyNames() []string {
	var out []string
	for _, s := range settingKeys {
		out = append(out, s.key)
	}
	return out
}

func settingsCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "settings", Short: "The account's general settings (a system administrator changes them)"}
	var output string
	get := &cobra.Command{
		Use:     "get",
		Short:   "Show the general settings",
		Example: "  runway settings get\n  runway settings get -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				st, err := c.QuotaService.GetSettings(ctx, &quotav1.GetSettingsRequest{Name: "settings"})
				if err != nil {
					return err
				}
				w := cmd.OutOrStdout()
				if output != formatTable {
					return printMessages(w, output, false, st)
				}
				f := fields{w: w}
				f.add("reject-over-subscription", strconv.FormatBool(st.GetRejectOverSubscription()))
				f.add("default-node-pool", sdk.ID(st.GetDefaultNodePool()))
				f.add("allow-over-quota", strconv.FormatBool(st.GetAllowOverQuotaByDefault()))
				suspend := "off"
				if d := st.GetWorkspaceAutoSuspend(); d != nil {
					suspend = d.AsDuration().String()
				}
				f.add("workspace-auto-suspend", suspend)
				f.add("gpu-resource-optimization", strconv.FormatBool(st.GetGpuResourceOptimization()))
				banner := "-"
				if b := st.GetLoginBanner(); b != "" {
					banner = strconv.Quote(b)
				}
				f.add("login-banner", banner)
				f.add("Updated", formatTime(st.GetUpdateTime().AsTime()))
				f.flush()
				return nil
			})
		},
	}
	outputFlag(get, &output)
	var long strings.Builder
	long.WriteString("Change general settings; each KEY=VALUE names one, an empty VALUE resets it to its default.\nOnly a system administrator may; each change is audited.\n\n")
	for _, s := range settingKeys {
		fmt.Fprintf(&long, "  %-26s %s\n", s.key, s.help)
	}
	set := &cobra.Command{
		Use:   "set KEY=VALUE...",
		Short: "Change general settings",
		Long:  long.String(),
		Example: `  runway settings set default-node-pool=a100 allow-over-quota=true
  runway settings set workspace-auto-suspend=8h
  runway settings set gpu-resource-optimization=false
  runway settings set login-banner='Authorised use only.'
  runway settings set login-banner=            # no banner`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, mask, err := parseSettings(args)
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if _, err := c.QuotaService.UpdateSettings(ctx, &quotav1.UpdateSettingsRequest{Settings: st,
					UpdateMask: &fieldmaskpb.FieldMask{Paths: mask}}); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "settings updated: %s\n", strings.Join(mask, ", "))
				return nil
			})
		},
	}
	cmd.AddCommand(get, set)
	return cmd
}
