// Command runway is Runway's single binary:
//
//	runway sim run FILE     play a scheduling scenario (sim_run.go)
//	runway dev              the whole control plane in one process (dev.go)
//	runway serve SERVICE    one service against an etcd cluster (serve.go)
//	runway agent            a node agent (agent.go)
//
// and the user CLI (training|workspace|inference submit, workload,
// project, department, nodepool, node), which talks only through pkg/sdk. The commands parse flags; the composition
// of the services lives in package server (cmd/runway/server).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/runwayhq/runway/pkg/sdk"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// rootCommand is the whole command tree.
func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "runway",
		Short:         "Runway: open GPU orchestration",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("server", "", "the Runway server, host:port (default: $"+sdk.EnvServer+" or the config file)")
	root.AddCommand(simCommand(), devCommand(), serveCommand(), gatewayCommand(), agentCommand(), reserveGPUCommand())
	root.AddCommand(submitCommands()...)
	root.AddCommand(workloadCommand(), projectCommand(), departmentCommand(), nodePoolCommand(), nodeCommand())
	root.AddCommand(policyCommand(), environmentCommand(), computeResourceCommand(), templateCommand(), credentialCommand(), dataSourceCommand(), notificationCommand(), adminCommand())
	root.AddCommand(topCommand(), reportCommand(), settingsCommand())
	root.AddCommand(loginCommand(), logoutCommand(), whoamiCommand(), userCommand(), applicationCommand(userApplications), applicationCommand(managedApplications),
		accessRuleCommand(), roleCommand(), auditCommand())
	return root
}

func main() {
	root := rootCommand()
	if err := root.Execute(); err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if msg := errorLine(err); msg != "" {
			fmt.Fprintln(os.Stderr, "error: "+msg)
		}
		os.Exit(code)
	}
}
