package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/runwayhq/runway/pkg/sdk"
)

// The user commands (workload, training, project, node, ...) talk to a
// Runway server only through pkg/sdk. The server and token come from
// --server / RUNWAY_SERVER / the config file and RUNWAY_TOKEN / the config
// file (sdk.FromEnvironment).

// callTimeout bounds one command's unary calls; watches run until interrupted.
const callTimeout = 30 * time.Second

// connect dials the server the command is pointed at, first refreshing a
// signed-in token that is about to expire (and saving it).
func connect(cmd *cobra.Command) (*sdk.Client, error) {
	cfg := sdk.FromEnvironment()
	if s, _ := cmd.Flags().GetString("server"); s != "" && s != cfg.Server {
		cfg = sdk.Config{Server: s, Token: cfg.Token, Insecure: cfg.Insecure} // another server: the refresh token is not its
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), callTimeout)
	defer cancel()
	if fresh, changed, err := sdk.Refreshed(ctx, cfg); err != nil {
		return nil, fmt.Errorf("refresh the sign-in (run runway login again): %s", errorLine(err))
	} else if changed {
		if err := sdk.SaveConfig(fresh); err != nil {
			return nil, err
		}
		cfg = fresh
	}
	return sdk.Dial(cmd.Context(), cfg)
}

// withClient runs f with a connected client and a context bounded by
// callTimeout; it closes the client after.
func withClient(cmd *cobra.Command, f func(ctx context.Context, c *sdk.Client) error) error {
	c, err := connect(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), callTimeout)
	defer cancel()
	return f(ctx, c)
}

// errorLine is the one line the CLI prints for an error: the server's
// message and its reason code, "no GPUs left [PROJECT_NOT_FOUND]".
func errorLine(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := strings.ReplaceAll(st.Message(), "\n", " ")
	if st.Code() == codes.Unavailable {
		msg = "cannot reach the Runway server (" + msg + "); is it running, and is " + sdk.EnvServer + " right?"
	}
	if r := sdk.Reason(err); r != "" {
		return msg + " [" + r + "]"
	}
	return msg + " [" + st.Code().String() + "]"
}

// usageError is a bad flag or argument: exit code 2, like cobra's own.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

// projectFlag adds -p/--project; required unless all is given.
// Shell completion offers the server's project names.
func projectFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "project", "p", "", "the project")
	_ = cmd.RegisterFlagCompletionFunc("project", complete(func(ctx context.Context, c *sdk.Client, _ *cobra.Command) ([]string, error) {
		ps, err := sdk.Collect(c.Projects(ctx))
		out := make([]string, 0, len(ps))
		for _, p := range ps {
			out = append(out, sdk.ID(p.GetName()))
		}
		return out, err
	}))
}

// workloadArg completes a workload name in the project given with -p.
func workloadArg(cmd *cobra.Command) {
	cmd.ValidArgsFunction = complete(func(ctx context.Context, c *sdk.Client, cmd *cobra.Command) ([]string, error) {
		project, _ := cmd.Flags().GetString("project")
		if project == "" {
			return nil, nil
		}
		ws, err := sdk.Collect(c.Workloads(ctx, project, ""))
		out := make([]string, 0, len(ws))
		for _, w := range ws {
			out = append(out, sdk.ID(w.GetName()))
		}
		return out, err
	})
}

// complete turns a lookup on the server into a cobra completion function;
// a server that cannot be reached completes nothing.
func complete(names func(ctx context.Context, c *sdk.Client, cmd *cobra.Command) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []string
		_ = withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
			var err error
			out, err = names(ctx, c, cmd)
			return err
		})
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func needProject(p string) error {
	if p == "" {
		return usageError("--project (-p) is required")
	}
	return nil
}

// watchInterval is how often `list --watch` reads again where the API has
// no watch (everything but workloads).
const watchInterval = 2 * time.Second

func watchFlag(cmd *cobra.Command, p *bool) {
	cmd.Flags().BoolVarP(p, "watch", "w", false, "print the list again whenever it changes")
}

// listLoop runs list once, or with --watch again every watchInterval,
// printing only when the output changed, until interrupted.
func listLoop(cmd *cobra.Command, output string, watch bool, list func(ctx context.Context, c *sdk.Client, w io.Writer) error) error {
	if err := checkFormat(output); err != nil {
		return err
	}
	c, err := connect(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	var last string
	for {
		ctx, cancel := context.WithTimeout(cmd.Context(), callTimeout)
		var buf bytes.Buffer
		err := list(ctx, c, &buf)
		cancel()
		if err != nil {
			if watch && cmd.Context().Err() != nil {
				return nil
			}
			return err
		}
		if buf.String() != last {
			if watch && output == formatTable && last != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n", time.Now().Format(time.TimeOnly))
			}
			if _, err := cmd.OutOrStdout().Write(buf.Bytes()); err != nil {
				return err
			}
			last = buf.String()
		}
		if !watch {
			return nil
		}
		select {
		case <-cmd.Context().Done():
			return nil
		case <-time.After(watchInterval):
		}
	}
}

// deleteCommand is `runway KIND delete NAME` for a resource named by its id.
func deleteCommand(kind, short string, del func(ctx context.Context, c *sdk.Client, id string) error) *cobra.Command {
	return &cobra.Command{
		Use:     "delete NAME",
		Short:   short,
		Example: "  runway " + strings.ReplaceAll(kind, " ", "") + " delete NAME",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if err := del(ctx, c, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %q deleted\n", kind, args[0])
				return nil
			})
		},
	}
}
