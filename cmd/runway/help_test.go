package main

import (
	"testing"

	"github.com/spf13/cobra"
)

// Every command a person runs has a one-line summary and examples in its
// --help; the groups (workload, project, ...) have a summary.
func TestEveryCommandHasHelp(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" || sub.Hidden {
				continue
			}
			if sub.Short == "" {
				t.Errorf("%q has no summary", sub.CommandPath())
			}
			if sub.Runnable() && sub.Example == "" {
				t.Errorf("%q has no examples", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(rootCommand())
}
