package main

import (
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

func workloadDescribeCommand() *cobra.Command {
	var project, output string
	cmd := &cobra.Command{
		Use:     "describe NAME -p PROJECT",
		Short:   "Show a workload: its spec, status, pods and nodes, why it waits, and its events",
		Example: "  runway workload describe a1 -p team-a\n  runway workload describe a1 -p team-a -o yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needProject(project); err != nil {
				return err
			}
			if err := checkFormat(output); err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				w, err := c.GetWorkload(ctx, project, args[0])
				if err != nil {
					return err
				}
				if output != formatTable {
					return printMessages(cmd.OutOrStdout(), output, false, w)
				}
				return describeWorkload(cmd.OutOrStdout(), w)
			})
		},
	}
	projectFlag(cmd, &project)
	workloadArg(cmd)
	outputFlag(cmd, &output)
	return cmd
}

// describeWorkload prints a workload for people, kubectl-describe style.
func describeWorkload(out io.Writer, w *workloadv1.Workload) error {
	spec, st := w.GetSpec(), w.GetStatus()
	f := fields{w: out}
	f.add("Name", sdk.ID(w.GetName()))
	f.add("Project", sdk.ID(w.GetProject()))
	f.add("Type", kindLabel(w.GetType()))
	if ls := w.GetLabels(); len(ls) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(ls)) {
			kv = append(kv, k+"="+ls[k])
		}
		f.add("Labels", strings.Join(kv, ", "))
	}
	f.add("Priority", orDefault(spec.GetPriority(), "the type's default"))
	if ttl := spec.GetTtlAfterFinishedSeconds(); ttl > 0 {
		f.add("Deleted", fmt.Sprintf("%s after it finishes", time.Duration(ttl)*time.Second))
	}
	status := phaseLabel(st.GetPhase())
	if n := st.GetPreemptionCount(); n > 0 {
		status += fmt.Sprintf(" (sent back to pending %d time%s)", n, plural(n))
	}
	f.add("Status", status)
	f.add("Submitted", formatTime(w.GetCreateTime().AsTime()))
	if t := st.GetStartTime(); t != nil {
		f.add("Started", formatTime(t.AsTime()))
	}
	if t := st.GetEndTime(); t != nil {
		f.add("Ended", formatTime(t.AsTime()))
	}
	f.add("Image", spec.GetImage())
	if p := spec.GetImagePullPolicy(); p != workloadv1.ImagePullPolicy_IMAGE_PULL_POLICY_UNSPECIFIED {
		f.add("Pull policy", pullPolicyName(p))
	}
	if c := spec.GetRegistryCredential(); c != "" {
		f.add("Pulled with", c)
	}
	if cmd := append(append([]string{}, spec.GetCommand()...), spec.GetArgs()...); len(cmd) > 0 {
		f.add("Command", strings.Join(cmd, " "))
	}
	f.add("Per pod", perPod(spec))
	f.add("Pods", fmt.Sprintf("%d running of %d requested", st.GetRunningPods(), st.GetRequestedPods()))
	if len(spec.GetNodePools()) > 0 {
		f.add("Node pools", strings.Join(ids(spec.GetNodePools()), ", "))
	}
	if spec.GetNodeType() != "" {
		f.add("Node type", spec.GetNodeType())
	}
	if st.GetNodePool() != "" {
		f.add("Placed in", sdk.ID(st.GetNodePool()))
	}
	if len(spec.GetEnv()) > 0 {
		var env []string
		for _, e := range spec.GetEnv() {
			if ref := e.GetCredential(); ref != nil {
				env = append(env, e.GetName()+"="+credentialPrefix+ref.GetCredential()+"/"+ref.GetKey())
			} else {
				env = append(env, e.GetName()+"="+e.GetValue())
			}
		}
		f.add("Environment", strings.Join(env, " "))
	}
	if sv := spec.GetServing(); sv != nil {
		f.add("Endpoint", fmt.Sprintf("port %d, %s access, %s", sv.GetPort(),
			strings.ToLower(strings.TrimPrefix(sv.GetAccess().String(), "SERVING_ACCESS_")), orDefault(st.GetEndpointUrl(), "not running")))
	}
	if len(spec.GetCredentials()) > 0 {
		var cs []string
		for _, m := range spec.GetCredentials() {
			cs = append(cs, strings.TrimSuffix(m.GetCredential()+":"+m.GetPath(), ":"))
		}
		f.add("Credentials", strings.Join(cs, " "))
	}
	for _, m := range spec.GetDataSources() {
		d := m.GetSource()
		what := dataSourceType(d) + " " + dataSourceWhat(d)
		if m.GetDataSource() != "" {
			what = m.GetDataSource() + " (" + what + ")"
		}
		if d.GetReadOnly() {
			what += ", read-only"
		}
		f.add("Mount "+d.GetMountPath(), what)
	}
	f.flush()

	if err := describeTools(out, w); err != nil {
		return err
	}
	if len(st.GetPods()) > 0 {
		fmt.Fprintln(out, "\nPods:")
		t := newIndentedTable(out, "Index", "Node", "Devices", "Share", "State", "Message")
		for _, p := range st.GetPods() {
			var devs []string
			for _, d := range p.GetDeviceIndexes() {
				devs = append(devs, fmt.Sprint(d))
			}
			t.row(fmt.Sprint(p.GetIndex()), sdk.ID(p.GetNode()), orDefault(strings.Join(devs, ","), "-"),
				formatGPUs(int64(p.GetFractionMilli())), enumLabel(p.GetState().String(), "POD_STATE_"), orDefault(p.GetMessage(), "-"))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if len(st.GetPendingReasons()) > 0 {
		fmt.Fprintln(out, "\nWhy it waits:")
		for _, r := range st.GetPendingReasons() {
			fmt.Fprintf(out, "  - %s\n", r.GetMessage())
		}
	}
	if len(st.GetEvents()) > 0 {
		fmt.Fprintln(out, "\nEvents:")
		t := newIndentedTable(out, "Time", "Event", "Message")
		for _, e := range st.GetEvents() {
			t.row(formatTime(e.GetTime().AsTime()), enumLabel(e.GetType().String(), "WORKLOAD_EVENT_TYPE_"), e.GetMessage())
		}
		return t.flush()
	}
	return nil
}

func perPod(spec *workloadv1.WorkloadSpec) string {
	var parts []string
	switch g := spec.GetGpu(); {
	case g.GetDevices() > 0:
		parts = append(parts, fmt.Sprintf("%d GPU%s", g.GetDevices(), plural(g.GetDevices())))
	case g.GetFractionMilli() > 0:
		parts = append(parts, formatGPUs(int64(g.GetFractionMilli()))+" GPU")
	case g.GetGpuMemoryBytes() > 0:
		parts = append(parts, formatBytes(g.GetGpuMemoryBytes())+" of GPU memory")
	default:
		parts = append(parts, "no GPU")
	}
	if c := spec.GetMilliCpu(); c > 0 {
		parts = append(parts, fmt.Sprintf("%g CPU", float64(c)/1000))
	}
	if m := spec.GetMemoryBytes(); m > 0 {
		parts = append(parts, formatBytes(m)+" memory")
	}
	return strings.Join(parts, ", ")
}

// fields prints "Label:  value" lines with the values aligned.
type fields struct {
	w     io.Writer
	lines [][2]string
}

func (f *fields) add(label, value string) { f.lines = append(f.lines, [2]string{label + ":", value}) }

func (f *fields) flush() {
	width := 0
	for _, l := range f.lines {
		width = max(width, len(l[0]))
	}
	for _, l := range f.lines {
		fmt.Fprintf(f.w, "%-*s  %s\n", width, l[0], l[1])
	}
	f.lines = nil
}

func formatTime(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func plural[N int32 | int64 | int](n N) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func ids(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = sdk.ID(n)
	}
	return out
}
