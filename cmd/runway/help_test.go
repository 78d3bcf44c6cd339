package main

import (
	"bytes"
	"strings"
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

// `runway environment create --help` says that a plain variable is no
// place for a secret and how to name a credential's key instead, and
// gives the pull flags.
func TestEnvironmentCreateHelpOnSecrets(t *testing.T) {
	root := rootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"environment", "create", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{"A plain environment variable (-e NAME=VALUE) is no place for a secret",
		"-e VAR=credential:NAME/KEY", "--pull-policy", "always, if-not-present (the default) or never", "--registry-credential"} {
		if !strings.Contains(help, want) {
			t.Errorf("environment create --help does not say %q:\n%s", want, out.String())
		}
	}
}
