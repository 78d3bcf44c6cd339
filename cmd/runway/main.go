// Command runway is Runway's single binary:
//
//	runway sim run FILE     play a scheduling scenario (sim_run.go)
//	runway dev              the whole control plane in one process (dev.go)
//	runway serve SERVICE    one service against an etcd cluster (serve.go)
//	runway agent            a node agent (agent.go)
//
// and the user CLI as it lands. The commands parse flags; the composition
// of the services lives in package server (cmd/runway/server).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	root := &cobra.Command{
		Use:           "runway",
		Short:         "Runway: open GPU orchestration",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(simCommand(), devCommand(), serveCommand(), agentCommand())
	if err := root.Execute(); err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if err.Error() != "" {
			fmt.Fprintln(os.Stderr, "error: "+err.Error())
		}
		os.Exit(code)
	}
}
