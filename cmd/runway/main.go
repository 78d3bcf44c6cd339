// Command runway is Runway's single binary: the simulator today, and the
// services, node agent and user CLI as they land.
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
	root.AddCommand(simCommand())
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
